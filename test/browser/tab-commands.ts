/**
 * Browser commands (run in Node by vitest, called from browser tests through
 * `commands` of `vitest/browser`) that open extra pages of the same origin,
 * i.e. extra tabs sharing the test's IndexedDB, and drive them: the
 * multi-tab and reload tests need real, separate pages, which a test
 * running in one iframe cannot open by itself.
 *
 * A tab loads tab.html (tab-main.ts) from the vitest server and exposes
 * `globalThis.isostoreTab`; `tabCall` runs one of its routines.
 */
import type {} from "@vitest/browser-playwright";
import type { Page } from "playwright";
import type { BrowserCommand } from "vitest/node";

const tabs = new Map<string, Page>();
const accepted = new Map<string, string[]>();
let nextTab = 0;

async function ready(page: Page): Promise<void> {
  await page.waitForFunction(() => (globalThis as { isostoreTab?: unknown }).isostoreTab !== undefined);
}

/** Open tab.html in a new page of the test's browser context (so it shares the test's IndexedDB). */
const openTab: BrowserCommand<[]> = async (context) => {
  const origin = new URL(context.page.url()).origin;
  const page = await context.context.newPage();
  const id = `tab-${++nextTab}`;
  const reports: string[] = [];
  accepted.set(id, reports);
  // Survives reloads: the page reports each append it saw accepted.
  await page.exposeFunction("reportAccepted", (event: string) => {
    reports.push(event);
  });
  await page.goto(`${origin}/tab.html`);
  await ready(page);
  tabs.set(id, page);
  return id;
};

const tabCall: BrowserCommand<[id: string, routine: string, args: unknown[]]> = async (_context, id, routine, args) => {
  const page = tabs.get(id);
  if (!page) throw new Error(`no tab ${id}`);
  return page.evaluate(
    async ({ routine, args }) => {
      const api = (globalThis as unknown as { isostoreTab: Record<string, (...a: unknown[]) => Promise<unknown>> }).isostoreTab;
      return api[routine]!(...args);
    },
    { routine, args },
  );
};

const reloadTab: BrowserCommand<[id: string]> = async (_context, id) => {
  const page = tabs.get(id);
  if (!page) throw new Error(`no tab ${id}`);
  await page.reload();
  await ready(page);
};

const tabAccepted: BrowserCommand<[id: string]> = async (_context, id) => [...(accepted.get(id) ?? [])];

const closeTab: BrowserCommand<[id: string]> = async (_context, id) => {
  await tabs.get(id)?.close();
  tabs.delete(id);
  accepted.delete(id);
};

export const tabCommands = { openTab, tabCall, reloadTab, tabAccepted, closeTab };

declare module "vitest/browser" {
  interface BrowserCommands {
    openTab: () => Promise<string>;
    tabCall: <T = unknown>(id: string, routine: string, args: unknown[]) => Promise<T>;
    reloadTab: (id: string) => Promise<void>;
    tabAccepted: (id: string) => Promise<string[]>;
    closeTab: (id: string) => Promise<void>;
  }
}
