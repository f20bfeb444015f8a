/**
 * `npm run dashboard`: writes grafana/dashboards/sns-gateway.json from grafana/dashboard.ts, and
 * the panel table of docs/observability.md (grafana/panel-table.ts). test/dashboard.test.ts calls
 * `renderDashboard()` and `renderObservabilityDoc()` to hold both files to the source.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { buildDashboard } from './dashboard.js';
import { OBSERVABILITY_MD, renderObservabilityDoc } from './panel-table.js';

/** Where Grafana's provisioning reads the dashboard (grafana/provisioning/dashboards). */
export const DASHBOARD_JSON = fileURLToPath(
  new URL('dashboards/sns-gateway.json', import.meta.url),
);

/**
 * The dashboard's JSON text, formatted as the repository's prettier config formats it, so the
 * file passes `prettier --check` and the same source always gives the same bytes.
 */
export async function renderDashboard(): Promise<string> {
  const options = await resolveConfig(DASHBOARD_JSON);
  return format(JSON.stringify(buildDashboard(), null, 2), {
    ...options,
    filepath: DASHBOARD_JSON,
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  writeFileSync(DASHBOARD_JSON, await renderDashboard());
  console.log(`wrote ${DASHBOARD_JSON}`);
  writeFileSync(OBSERVABILITY_MD, await renderObservabilityDoc());
  console.log(`wrote the panel table of ${OBSERVABILITY_MD}`);
}
