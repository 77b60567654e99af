/**
 * Test support for the IndexedDB engine's opens: a caller that retries an
 * open refused as `blocked` (retryable), as the engine invites it to.
 */

/** Run `call` until it no longer rejects `blocked` (a few tries, a few ms apart), as a caller invited to retry does. */
export async function retryWhileBlocked<T>(call: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await call();
    } catch (error) {
      if (tries >= 50 || (error as { code?: unknown }).code !== "blocked") throw error;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}
