/**
 * `isostore/worker`: the HTTP API over any `UsageJournal` (a Hono app), for
 * the isostore Worker and for your own.
 *
 * - {@link createApp}: the `/v1` JSON API (docs/http-api.md), validated by zod
 *   schemas that are also its OpenAPI document, with bearer-token scopes;
 *   with `stores`, also the store routes (`/v1/stores/{store}/...`) over any
 *   {@link RemoteStore}.
 *
 * @example
 * import { createApp } from "isostore/worker";
 * const app = createApp({ journals: { usage: journal }, auth: { tokens } });
 * export default { fetch: app.fetch };
 */
export { createApp, type AppEnv, type AppOptions, type ServedJournal } from "./app.js";
export { checkTokens, mayUseStore, TokenMatcher, type Principal, type Scope, type TokenConfig } from "./auth.js";
export { ApiError, STATUS_OF, RETRY_AFTER_SECONDS, errorAnswer, type ApiErrorCode, type ErrorBody, type StorageErrorCode } from "./errors.js";
export { MAX_ACK_BATCH, MAX_BULK, MAX_CLAIM_ANSWER_BYTES, MAX_ITEM_TEXT } from "./schemas.js";
export {
  base64Length,
  decodeBase64,
  decodeStorageError,
  encodeBase64,
  encodeStorageError,
  resolveStore,
  type RemoteStore,
  type StorageWireError,
  type StoreTable,
} from "./stores.js";
export { MAX_STORE_BODY_BYTES } from "./store-routes.js";
export { MAX_LEDGER_PAGE_BYTES, MAX_LEDGER_PAGE_RECORDS } from "./store-schemas.js";
export {
  usageJournal,
  UsageReportedLateError,
  type ReportedUsage,
  type UsageCounters,
  type UsageJournalMiddleware,
  type UsageJournalOptions,
  type UsageVariables,
} from "./usage-middleware.js";
