// Small helpers shared by the front end.

/**
 * Returns a function that delays calling `fn` until `waitMs` milliseconds have passed
 * since the last call (debouncing bursts of events such as keystrokes).
 */
export function debounce(fn, waitMs) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), waitMs);
  };
}

/** Formats a price in euros with two decimals. */
export const formatPrice = (amount) => `€${amount.toFixed(2)}`;
