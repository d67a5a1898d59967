// Opens a run still in progress in Debian's headless Chromium, says
// "ready" once the page listens for the run's events, then waits for the
// page to show, without a reload by hand, that the run completed. Prints
// what it saw as JSON.
//
// node live.mjs BASE_URL RUN [CHROMIUM]
import { chromium } from "playwright-core";
import readline from "node:readline";

const [base, run, exe = "/usr/bin/chromium"] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: exe, args: ["--no-sandbox", "--disable-gpu"] });
const page = await browser.newPage();
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
const listening = page.waitForResponse((r) => r.url().endsWith(`/runs/${run}/live`));
await page.goto(`${base}runs/${run}`);
await listening;
const before = (await page.textContent("#status")).trim();
const url = page.url();
console.log("ready");
// The test publishes the run's end once it reads "ready".
const rl = readline.createInterface({ input: process.stdin });
await new Promise((done) => rl.once("line", done));
rl.close();
await page.waitForFunction(() => document.getElementById("status").textContent.trim() === "completed", null, { timeout: 20000 });
const out = {
  before, errors, sameURL: page.url() === url,
  after: (await page.textContent("#status")).trim(),
  summary: (await page.textContent("#summary")).trim(),
  listening: await page.$eval("#main", (m) => m.hasAttribute("data-live")),
};
await browser.close();
console.log(JSON.stringify(out));
