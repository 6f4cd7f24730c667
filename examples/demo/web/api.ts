// API client of the demo shop's web front end.

export interface UserProfile {
  id: number;
  name: string;
  email: string;
}

const BASE_URL = "/api/v1";

/** Fetches a user's profile from the backend and throws on HTTP errors. */
export async function fetchUserProfile(userId: number): Promise<UserProfile> {
  const response = await fetch(`${BASE_URL}/users/${userId}`);
  if (!response.ok) {
    throw new Error(`loading profile ${userId} failed: ${response.status}`);
  }
  return (await response.json()) as UserProfile;
}

/** Adds a product to the shopping cart of the current session. */
export async function addToCart(productId: string, quantity: number): Promise<void> {
  await fetch(`${BASE_URL}/cart`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ productId, quantity }),
  });
}
