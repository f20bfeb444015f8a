/**
 * The gateway as browsers see it, in headless Chromium (Debian's package) driven by
 * playwright-core: CORS from a page of another origin, and the try-it page at `/` used as a person
 * would (type, choose, click, read the table and the cache badge; page through a large parent with
 * "More"; see a subdomain created on chain appear without a reload), with screenshots.
 * SCREENSHOT_PATH keeps the first screenshot there; SCREENSHOT_DIR keeps every one there.
 *
 * playwright-core brings no browser; `npx playwright install` is never needed. Without
 * /usr/bin/chromium (scripts/install-test-deps.sh installs it) the file is skipped.
 */
import { accessSync, constants, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Keypair } from '@solana/web3.js';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FOLLOW, watched } from './support/freshness.js';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';

const CHROMIUM = '/usr/bin/chromium';

function chromiumMissing(): string | undefined {
  try {
    accessSync(CHROMIUM, constants.X_OK);
    return undefined;
  } catch {
    return `${CHROMIUM} is not installed (scripts/install-test-deps.sh installs chromium)`;
  }
}

const missing = chromiumMissing();
if (missing) console.warn(`browser.test: skipped: ${missing}`);

const LABELS = ['bullish', 'hollaaa', 'testing'];

/** A parent with more subdomains than two pages of the try-it page hold (100 a page). */
const CROWD = 'crowd';
const CROWD_LABELS = Array.from({ length: 250 }, (_, i) => `n${String(i).padStart(3, '0')}`);

/** What the cross-origin page reports of one fetch. */
type Seen = { status: number; body: unknown; cacheControl: string | null } | { error: string };

/** A page whose script reads the gateway from its own origin, once simply, once preflighted. */
function crossOriginPage(gatewayUrl: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>another origin</title></head>
<body>
<script>
  const gateway = ${JSON.stringify(gatewayUrl)};
  const seen = (init) =>
    fetch(gateway + '/subdomains/67679', init).then(
      async (res) => ({
        status: res.status,
        body: await res.json(),
        cacheControl: res.headers.get('cache-control'),
      }),
      (err) => ({ error: String(err) }),
    );
  window.results = (async () => ({
    // A "simple" request: no preflight, the answer's Access-Control-Allow-Origin decides.
    simple: await seen(),
    // A request header outside the CORS safelist: the browser sends OPTIONS first.
    preflighted: await seen({ headers: { 'X-Requested-By': 'browser-test' } }),
    // A method the gateway does not allow: the browser must refuse it at the preflight.
    refused: await seen({ method: 'DELETE' }),
  }))();
</script>
</body></html>`;
}

describe.skipIf(!!missing)('the gateway in headless Chromium', () => {
  let profile: string;
  let shots: string;
  let context: BrowserContext;
  /** The gateway the cross-origin page reads, and the one whose try-it page is used. */
  let corsGw: Gateway;
  let pageGw: Gateway;
  /** A gateway following the chain (websockets on), holding CROWD, for the live page. */
  let liveGw: Gateway;
  /** The other origin: a plain node:http server serving the cross-origin page. */
  let site: Server;
  let siteUrl: string;

  beforeAll(async () => {
    profile = mkdtempSync(join(tmpdir(), 'snsgw-chromium-'));
    shots = mkdtempSync(join(tmpdir(), 'snsgw-shot-'));
    const chain = seedDemo();
    // Owners differ from row to row, so a row showing another row's owner is seen.
    const owners = [Keypair.generate().publicKey, Keypair.generate().publicKey];
    CROWD_LABELS.forEach((label, i) =>
      chain.addSubdomain(CROWD, label, i % 3 === 0 ? {} : { owner: owners[i % 2] }),
    );
    [corsGw, pageGw, liveGw] = await Promise.all([
      startGateway(),
      startGateway(),
      startGateway({ chain, env: FOLLOW }),
    ]);
    const html = crossOriginPage(corsGw.baseUrl);
    site = createServer((req, res) => {
      if (req.url === '/')
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    const address = site.address();
    if (!address || typeof address === 'string') throw new Error('no TCP address');
    siteUrl = `http://127.0.0.1:${address.port}`;
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1000, height: 640 },
    });
  });

  afterAll(async () => {
    // The browser first: Chromium keeps spare connections open that never carry a request, and
    // a server's close() waits for those (neither idle nor expired for node:http).
    await context?.close();
    if (site) {
      await new Promise<void>((resolve) => {
        site.close(() => resolve());
        site.closeAllConnections();
      });
    }
    await Promise.all([corsGw?.close(), pageGw?.close(), liveGw?.close()]);
    for (const dir of [profile, shots]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A new tab that records script errors and console errors of the page. */
  async function newPage(): Promise<{ page: Page; problems: string[] }> {
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console: ${msg.text()} (${msg.location().url})`);
    });
    return { page, problems };
  }

  /** Requests the API of `gw` answered, by method and, if given, route and status. */
  async function originRequests(
    gw: Gateway,
    match: { method?: string; route?: string; status?: string },
  ): Promise<number> {
    const { values } = await gw.metrics.httpDuration.get();
    return values
      .filter(
        (v) =>
          v.metricName === 'http_request_duration_seconds_count' &&
          (match.method === undefined || v.labels.method === match.method) &&
          (match.route === undefined || v.labels.route === match.route) &&
          (match.status === undefined || v.labels.status_code === match.status),
      )
      .reduce((sum, v) => sum + v.value, 0);
  }

  it('CORS: a page of another origin reads /subdomains, with and without a preflight', async () => {
    expect(new URL(siteUrl).origin).not.toBe(new URL(corsGw.baseUrl).origin);
    const { page, problems } = await newPage();
    await page.goto(`${siteUrl}/`);
    const results = (await page.evaluate(
      () => (globalThis as unknown as { results: Promise<unknown> }).results,
    )) as Record<'simple' | 'preflighted' | 'refused', Seen>;

    const ok = { s: 'ok', result: LABELS };
    expect(results.simple).toEqual({
      status: 200,
      body: ok,
      cacheControl: expect.stringMatching(/^public, max-age=\d+/) as unknown,
    });
    expect(results.preflighted).toMatchObject({ status: 200, body: ok });
    // The preflight reached the gateway (and was answered); the DELETE never did.
    expect(await originRequests(corsGw, { method: 'OPTIONS' })).toBeGreaterThanOrEqual(1);
    expect(results.refused).toEqual({
      error: expect.stringContaining('Failed to fetch') as unknown,
    });
    expect(await originRequests(corsGw, { method: 'DELETE' })).toBe(0);
    // Chromium reports the refused DELETE as a console error; nothing else may appear.
    expect(problems.filter((p) => !/CORS policy|Failed to load resource/.test(p))).toEqual([]);
    await page.close();
  });

  type Detail = { label: string; key: string; owner: string };

  /** The [label, owner] pairs the try-it page shows. */
  async function shownOwners(page: Page): Promise<[string, string][]> {
    const labels = await page.locator('#results tbody tr td:first-child').allTextContents();
    const owners = await page.locator('#results tbody td.owner').allTextContents();
    return labels.map((label, i) => [label, owners[i] ?? '']);
  }

  /** Where a screenshot goes: SCREENSHOT_DIR if set, else the test's own folder. */
  const shotPath = (name: string) => join(process.env.SCREENSHOT_DIR ?? shots, name);

  /**
   * Takes a screenshot of `page` (the whole page, or the viewport) into `file`, and checks it is
   * a PNG of the viewport's width.
   */
  async function screenshot(page: Page, file: string, fullPage = true) {
    await page.screenshot({ path: file, fullPage });
    const png = readFileSync(file);
    expect(png.subarray(0, 8)).toEqual(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]));
    expect(png.subarray(12, 16).toString('latin1')).toBe('IHDR');
    expect(png.readUInt32BE(16)).toBe(1000); // the viewport's width
    expect(png.readUInt32BE(20)).toBeGreaterThan(0);
    expect(png.length).toBeGreaterThan(5_000);
  }

  /** Submits the try-it form and waits for the table; the rows and the badge. */
  async function lookUp(page: Page) {
    await page.getByRole('button', { name: 'Look up' }).click();
    await page.locator('#results').waitFor({ state: 'visible' });
    return {
      labels: await page.locator('#results tbody tr td:first-child').allTextContents(),
      keys: await page.locator('#results tbody td.key').allTextContents(),
      badge: await page.locator('#status .badge').textContent(),
    };
  }

  it('the try-it page lists subdomains with their record keys, and shows MISS then HIT', async () => {
    const gw = pageGw;
    const { page, problems } = await newPage();
    await page.goto(`${gw.baseUrl}/`);
    await page.getByLabel('Parent').fill('67679');
    // The record types come from /types/record after load.
    await page.waitForFunction(
      "[...document.querySelectorAll('#record option')].some((o) => o.value === 'SOL')",
    );
    await page.getByLabel('Record').selectOption('SOL');

    const first = await lookUp(page);
    expect(first.labels).toEqual(LABELS);
    expect(first.badge).toBe('MISS');
    const expected = await Promise.all(
      LABELS.map(async (label) => {
        const res = await fetch(`${gw.baseUrl}/record-key-v2/${label}.67679/SOL`);
        return ((await res.json()) as { result: string }).result;
      }),
    );
    expect(first.keys).toEqual(expected);
    for (const key of first.keys) expect(key).toMatch(/^[1-9A-HJ-NP-Za-km-z]{32,44}$/);

    const second = await lookUp(page);
    expect(second.labels).toEqual(LABELS);
    expect(second.keys).toEqual(expected);
    expect(second.badge).toBe('HIT');
    // The second lookup asked the gateway again (If-None-Match, answered 304) rather than
    // showing the browser's stored copy with its old X-Cache.
    const route = '/subdomains/:parent/details';
    expect(await originRequests(gw, { route, status: '304' })).toBe(1);
    // Owners from /details, beside each label.
    const details = (await gw.get('/subdomains/67679/details')).body.result as Detail[];
    expect(await shownOwners(page)).toEqual(details.map((d) => [d.label, d.owner]));

    await screenshot(page, process.env.SCREENSHOT_PATH ?? shotPath('try-it.png'));
    expect(problems).toEqual([]);
    await page.close();
  });

  it('the try-it page pages through a large parent, and shows a new subdomain without a reload', async () => {
    const gw = liveGw;
    // The worker follows CROWD on chain from here on (its program subscription is up).
    await watched(gw, gw.sim, CROWD);
    const { page, problems } = await newPage();
    await page.goto(`${gw.baseUrl}/`);
    await page.waitForFunction(
      "[...document.querySelectorAll('#record option')].some((o) => o.value === 'SOL')",
    );
    await page.getByLabel('Parent').fill(CROWD);
    await page.getByRole('button', { name: 'Look up' }).click();
    await page.locator('#results').waitFor({ state: 'visible' });
    const rows = page.locator('#results tbody tr');
    expect(await rows.count()).toBe(100);
    await expect.poll(() => page.locator('#status').textContent()).toMatch(/^250 subdomain/);

    // "More" until it goes: 100, 200, 250 rows.
    const more = page.getByRole('button', { name: 'More' });
    for (const want of [200, 250]) {
      await more.click();
      await waitFor(async () => (await rows.count()) === want);
    }
    await more.waitFor({ state: 'hidden' });
    const list = (await gw.get(`/subdomains/${CROWD}`)).body.result as string[];
    expect(list).toEqual(CROWD_LABELS);
    expect(await page.locator('#results tbody tr td:first-child').allTextContents()).toEqual(list);
    const details = (await gw.get(`/subdomains/${CROWD}/details`)).body.result as Detail[];
    expect(await shownOwners(page)).toEqual(details.map((d) => [d.label, d.owner]));
    expect(new Set(details.map((d) => d.owner)).size).toBe(3);
    // The record keys, as the batch route derives them.
    const keys = await page.locator('#results tbody td.key').allTextContents();
    const batch = await Promise.all(
      list.map(async (label) => {
        const res = await gw.get(`/record-keys-v2/${label}.${CROWD}?records=SOL`);
        return (res.body.result as Record<string, string>).SOL;
      }),
    );
    expect(keys).toEqual(batch);

    // Live: created on the simulator, it appears in its place, in the same document.
    await expect.poll(() => page.locator('#live').textContent()).toBe('live');
    await page.evaluate(() => Object.assign(globalThis, { sameDocument: true }));
    const owner = Keypair.generate().publicKey;
    // Between two loaded rows, so it lands inside the table rather than past its last page.
    gw.sim.chain.addSubdomain(CROWD, 'n100a', { owner });
    const added = page.locator('#results tbody tr[data-label="n100a"]');
    await added.waitFor({ state: 'attached', timeout: 10_000 });
    expect(await page.evaluate(() => 'sameDocument' in globalThis)).toBe(true);
    const after = (await gw.get(`/subdomains/${CROWD}`)).body.result as string[];
    expect(after).toHaveLength(251);
    expect(await page.locator('#results tbody tr td:first-child').allTextContents()).toEqual(after);
    expect(await rows.nth(after.indexOf('n100a')).getAttribute('data-label')).toBe('n100a');
    expect(await added.locator('td.owner').textContent()).toBe(owner.toBase58());
    expect(await added.getAttribute('class')).toBe('added');
    await expect.poll(() => page.locator('#status').textContent()).toMatch(/^251 subdomain/);

    // The viewport around the new row: the whole page is 251 rows long.
    // (An expression: the test's types know no DOM.)
    await page.evaluate(
      `document.querySelector('#results tr[data-label="n100a"]').scrollIntoView({ block: 'center' })`,
    );
    await screenshot(page, shotPath('try-it-live.png'), false);

    // The prefix box: only the labels starting with it, as typed, as the API compares it.
    await page.getByLabel('Prefix').fill('n10');
    await page.getByRole('button', { name: 'Look up' }).click();
    const withPrefix = after.filter((l) => l.startsWith('n10'));
    await waitFor(async () => (await rows.count()) === withPrefix.length);
    expect(await page.locator('#results tbody tr td:first-child').allTextContents()).toEqual(
      withPrefix,
    );
    await expect.poll(() => page.locator('#status').textContent()).toMatch(/^11 subdomain/);
    expect(await more.isHidden()).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });
});
