"""A least-recently-used cache in front of the product catalogue."""

from collections import OrderedDict


class LRUCache:
    """Keeps at most `capacity` entries and evicts the least recently used one."""

    def __init__(self, capacity: int):
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.entries = OrderedDict()

    def get(self, key):
        """Returns the cached value and marks it as recently used, or None."""
        if key not in self.entries:
            return None
        self.entries.move_to_end(key)
        return self.entries[key]

    def put(self, key, value):
        """Stores a value, evicting the oldest entry when the cache is full."""
        self.entries[key] = value
        self.entries.move_to_end(key)
        if len(self.entries) > self.capacity:
            self.entries.popitem(last=False)


def cached_price(cache: LRUCache, catalogue: dict, product_id: str) -> float:
    """Looks a product's price up through the cache."""
    price = cache.get(product_id)
    if price is None:
        price = catalogue[product_id]["price"]
        cache.put(product_id, price)
    return price
