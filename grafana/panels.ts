/**
 * The dashboard's house style: how one panel entry (grafana/metric-panels.ts, grafana/dashboard.ts) becomes a Grafana panel
 * through `@grafana/grafana-foundation-sdk`. Every time series looks alike (thin lines, a table
 * legend with mean / max / last, a shared tooltip sorted high to low) and every stat shows one
 * number, so an entry names only what differs: title, description, unit, width and its queries.
 */
import type * as cog from '@grafana/grafana-foundation-sdk/cog';
import {
  BigValueColorMode,
  BigValueGraphMode,
  BigValueJustifyMode,
  BigValueTextMode,
  GraphDrawStyle,
  LegendDisplayMode,
  LegendPlacement,
  ReduceDataOptionsBuilder,
  SortOrder,
  StackingConfigBuilder,
  StackingMode,
  TooltipDisplayMode,
  VisibilityMode,
  VizLegendOptionsBuilder,
  VizOrientation,
  VizTooltipOptionsBuilder,
} from '@grafana/grafana-foundation-sdk/common';
import type { DataSourceRef, Panel } from '@grafana/grafana-foundation-sdk/dashboard';
import { DataqueryBuilder } from '@grafana/grafana-foundation-sdk/prometheus';
import type { PanelQuery } from './metric-panels.js';
import { PanelBuilder as StatPanelBuilder } from '@grafana/grafana-foundation-sdk/stat';
import { PanelBuilder as TimeseriesPanelBuilder } from '@grafana/grafana-foundation-sdk/timeseries';

/**
 * The Prometheus of docker-compose.yml, by the uid grafana/provisioning/datasources/prometheus.yml
 * gives it; test/dashboard.test.ts holds every panel to it.
 */
export const PROMETHEUS: DataSourceRef = { type: 'prometheus', uid: 'prometheus' };

/** Every panel is this tall, in grid units; rows of panels then line up. */
const HEIGHT = 8;

/** One PromQL query of a panel and the legend of its series. */
export type Query = PanelQuery;

/** What every panel entry names. */
type PanelSpec = {
  /**
   * The panel's id: Grafana's links to one panel (`viewPanel=`) carry it, so it never changes and
   * no two panels share one. A new panel takes one more than the highest of the dashboard.
   */
  id: number;
  title: string;
  /** Shown under the panel's (i) icon: what is counted, and how to read it. */
  description: string;
  /** A Grafana unit id: `reqps`, `ops`, `s`, `bytes`, `Bps`, `percentunit`, `short`. */
  unit: string;
  /** Grid columns of 24; panels fill a line left to right, then wrap. */
  width: number;
  /** The queries, in order; their refIds are A, B, C… in that order. */
  queries: Query[];
};

/** A time series over the dashboard's range. */
export type TimeseriesSpec = PanelSpec & {
  /** The y axis' lower bound, for ratios and counts that cannot go below it. */
  min?: number;
  /** Stack the series and fill under them: for shares that add up to a whole. */
  stacked?: boolean;
};

/** One number over the dashboard's whole range: its queries are instant queries. */
export type StatSpec = PanelSpec & { decimals: number };

/**
 * A panel entry of grafana/dashboard.ts: makes the panel's builder. A fresh builder per dashboard
 * built, because the dashboard builder writes each panel's grid position into it.
 */
export type PanelEntry = () => cog.Builder<Panel>;

/** A range query (or an instant one) on the provisioned Prometheus, with refId A, B, C… */
function targets(queries: Query[], instant: boolean): Array<cog.Builder<cog.Dataquery>> {
  return queries.map((q, i) => {
    const target = new DataqueryBuilder()
      .refId(String.fromCharCode(65 + i))
      .datasource(PROMETHEUS)
      .expr(q.expr)
      .legendFormat(q.legend);
    return instant ? target.instant() : target.range();
  });
}

/** A time series panel in the dashboard's style. */
export function timeseries(spec: TimeseriesSpec): PanelEntry {
  return () => {
    const panel = new TimeseriesPanelBuilder()
      .id(spec.id)
      .title(spec.title)
      .description(spec.description)
      .datasource(PROMETHEUS)
      .height(HEIGHT)
      .span(spec.width)
      .unit(spec.unit)
      .drawStyle(GraphDrawStyle.Line)
      .lineWidth(1)
      .fillOpacity(spec.stacked ? 40 : 10)
      .showPoints(VisibilityMode.Never)
      .spanNulls(false)
      .stacking(
        new StackingConfigBuilder()
          .mode(spec.stacked ? StackingMode.Normal : StackingMode.None)
          .group('A'),
      )
      .targets(targets(spec.queries, false))
      .legend(
        new VizLegendOptionsBuilder()
          .displayMode(LegendDisplayMode.Table)
          .placement(LegendPlacement.Bottom)
          .showLegend(true)
          .calcs(['mean', 'max', 'lastNotNull']),
      )
      .tooltip(
        new VizTooltipOptionsBuilder().mode(TooltipDisplayMode.Multi).sort(SortOrder.Descending),
      );
    if (spec.min !== undefined) panel.min(spec.min);
    return panel;
  };
}

/** A stat panel: the last value of each instant query, as a number. */
export function stat(spec: StatSpec): PanelEntry {
  return () =>
    new StatPanelBuilder()
      .id(spec.id)
      .title(spec.title)
      .description(spec.description)
      .datasource(PROMETHEUS)
      .height(HEIGHT)
      .span(spec.width)
      .unit(spec.unit)
      .decimals(spec.decimals)
      .targets(targets(spec.queries, true))
      .reduceOptions(new ReduceDataOptionsBuilder().calcs(['lastNotNull']).fields('').values(false))
      .colorMode(BigValueColorMode.Value)
      .graphMode(BigValueGraphMode.None)
      .textMode(BigValueTextMode.Auto)
      .justifyMode(BigValueJustifyMode.Auto)
      .orientation(VizOrientation.Auto);
}
