/** Which commit a benchmark run measured (bench/run.ts writes it into BENCHMARKS.md). */
import { execFileSync } from "node:child_process";

/**
 * The commit this run measured: `git rev-parse --short HEAD`, with "+dirty"
 * when `git status --porcelain` lists changes (untracked files included), so
 * the figures are not taken for the commit's own. `git` runs `args` and
 * answers its output; "unknown" when it fails (no git, not a checkout).
 */
export function commitLabel(git: (args: string[]) => string = (args) => execFileSync("git", args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })): string {
  try {
    const head = git(["rev-parse", "--short", "HEAD"]).trim();
    const dirty = git(["status", "--porcelain"]).trim() !== "";
    return `${head}${dirty ? "+dirty" : ""}`;
  } catch {
    return "unknown (git failed)";
  }
}
