// Drives t1 ui in Debian's headless Chromium with playwright-core: from
// the runs list to a run, its attempts (sorted, filtered), one attempt
// and its token view, the routing of one token, and a comparison. It
// prints what each page showed as one JSON object, for the Go test to
// check against the tables, and saves a screenshot of each page.
//
// node browser.mjs BASE_URL RUN SCREENSHOT_DIR [CHROMIUM]
import { chromium } from "playwright-core";

const [base, run, shots, exe = "/usr/bin/chromium"] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: exe, args: ["--no-sandbox", "--disable-gpu"] });
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
// Nothing may leave the machine: every request goes to the server.
const foreign = [];
page.on("request", (r) => { if (!r.url().startsWith(base)) foreign.push(r.url()); });
const out = { errors, foreign };
const texts = (sel) => page.$$eval(sel, (els) => els.map((e) => e.textContent.trim()));
const shot = (name) => page.screenshot({ path: `${shots}/${name}.png` });

await page.goto(base);
out.runs = await texts("#runs tbody tr td:first-child");
await page.click(`#runs a[href="/runs/${run}"]`);
await page.waitForSelector("#curves canvas");
await page.waitForFunction(() => document.querySelectorAll("#curves .curve").length === JSON.parse(document.getElementById("curve-data").textContent || "[]").length);
out.curves = await page.$$eval("#curves .curve", (els) => els.map((e) => ({ title: e.dataset.title, canvas: !!e.querySelector("canvas") })));
out.recipe = await page.$$eval("#recipe tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent.trim())));
out.iterationHead = await texts("#iterations thead th");
out.iterations = await page.$$eval("#iterations tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent.trim())));
out.status = (await page.textContent("#status")).trim();
await shot("overview");

await page.click("header >> text=attempts");
await page.waitForSelector("#attempts");
out.attemptsCount = (await page.textContent("#count")).trim();
out.attemptsHead = await texts("#attempts thead th");
await page.click("#attempts thead >> text=reward");
await page.click("#attempts thead >> text=reward"); // again: descending
await page.waitForURL(/desc=1/);
out.byRewardDesc = await page.$$eval("#attempts tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent.trim())));
await page.fill("#filter input[name=where]", "purpose = 'eval'");
await page.click("#filter button");
await page.waitForURL(/where=purpose/);
out.evalCount = (await page.textContent("#count")).trim();
await page.fill("#filter input[name=where]", "rewrd > 0");
await page.click("#filter button");
await page.waitForSelector("#error");
out.badWhere = (await page.textContent("#error")).trim();
await page.fill("#filter input[name=where]", "purpose = 'train'");
await page.click("#filter button");
await page.waitForURL(/where=purpose/);
await shot("attempts");
const first = page.locator("#attempts tbody tr").first();
out.clicked = await first.evaluate((r) => [...r.cells].map((c) => c.textContent.trim()));
await first.locator("a.attempt").click();
await page.waitForSelector("#tokens");
out.attempt = {
  verdict: (await page.textContent("#verdict")).trim(),
  assertions: await page.$$eval("#assertions li", (els) => els.map((e) => ({ text: e.textContent.trim(), pass: e.className === "pass" }))),
  turns: await page.$$eval("#turns li.turn", (els) => els.map((e) => Number(e.dataset.turn))),
  tokenSummary: (await page.textContent("#token-summary")).trim(),
  tokens: await page.$$eval("#tokens .t", (els) => els.length),
  sampled: await page.$$eval("#tokens .t.s", (els) => els.map((e) => ({ i: Number(e.dataset.i), style: e.getAttribute("style") || "", title: e.title }))),
  marks: await texts("#tokens .mark"),
};
await page.locator("#tokens .t.s").first().scrollIntoViewIfNeeded();
await shot("attempt");
await page.click("#colour-advantage");
await page.waitForSelector("#tokens");
out.advantage = await page.$$eval("#tokens .t.s", (els) => els.map((e) => ({ i: Number(e.dataset.i), style: e.getAttribute("style") || "" })));
await shot("tokens-advantage");
await page.click("#colour-gap");
await page.waitForSelector("#tokens");
out.gap = await page.$$eval("#tokens .t.s", (els) => els.map((e) => ({ i: Number(e.dataset.i), style: e.getAttribute("style") || "", title: e.title })));
out.gapErrors = await texts("p.error");
await shot("tokens-gap");
const pick = page.locator("#tokens .t.s").first();
out.routingToken = Number(await pick.getAttribute("data-i"));
await pick.click();
await page.waitForSelector("#routing-summary");
out.routing = {
  summary: (await page.textContent("#routing-summary")).trim(),
  picked: await page.$$eval("#picked tbody tr", (rows) => rows.map((r) => [...r.cells[1].querySelectorAll(".expert")].map((e) => Number(e.textContent)))),
  loadRows: await page.$$eval("#load tbody tr", (rows) => rows.length),
  live: await page.$$eval("#picked td.live", (cells) => cells.map((c) => [...c.querySelectorAll(".expert")].map((e) => Number(e.textContent)))),
  mismatch: await page.$$eval("#mismatch tbody tr", (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent.trim()))),
  errors: await texts("p.error"),
};
await shot("routing");

await page.goto(`${base}runs/${run}/compare`);
await page.waitForSelector(".sides");
out.compare = await page.$$eval(".side", (els) => els.map((e) => ({ version: Number(e.dataset.version), attempts: e.querySelectorAll(".cmp-attempt").length })));
await shot("compare");

const res = await page.goto(`${base}runs/no-such-run`);
out.unknown = { status: res.status(), text: (await page.textContent("#error")).trim() };
await browser.close();
console.log(JSON.stringify(out));
