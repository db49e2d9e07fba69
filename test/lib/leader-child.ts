// A process that runs a leader elector (src/hub/pg/leader.ts) on the database named by its
// argument, with the elector's default timings, and prints "leading" or "following" on each
// change: the leader that a test kills or freezes.
import { PostgresLeaderElector } from "../../src/hub/pg/leader.ts";
import { realClock } from "../../src/util/clock.ts";
import { nullLogger } from "../../src/util/log.ts";

const url = process.argv[2];
if (url === undefined) throw new Error("usage: leader-child.ts postgres://…");
const elector = new PostgresLeaderElector({ url, clock: realClock, log: nullLogger });
elector.onChange((leading) => console.log(leading ? "leading" : "following"));
await elector.run(new AbortController().signal);
