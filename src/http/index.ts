/**
 * `isostore/http`: {@link HttpJournal}, a `UsageJournal` over the isostore
 * HTTP API (`isostore/worker`), usable from a browser, Node or another Worker.
 *
 * @example
 * import { HttpJournal } from "isostore/http";
 * const journal = await HttpJournal.connect({ baseUrl: "http://localhost:8787", journal: "usage", token });
 */
export {
  HttpJournal,
  HttpError,
  type BatchingOptions,
  type FetchLike,
  type HttpCallOptions,
  type HttpJournalDescriptor,
  type HttpJournalOptions,
  type ResponseLike,
  type RetryOptions,
} from "./http-journal.js";
