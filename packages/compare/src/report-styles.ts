/**
 * The HTML report's style sheet, inlined into its `<style>` element.
 * @module
 */

/** Every rule of the page: the table, the charts' grid, the failures and the notes. */
export const REPORT_STYLE = `
:root { color-scheme: light; --fg: #1d232b; --muted: #5b6672; --line: #d9dee4; --best: #0b6b2f; --best-bg: #e3f4e8; --bad: #a4161a; --bad-bg: #fde8e8; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1400px; padding: 24px 28px 48px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: #fff; }
h1 { font-size: 22px; margin: 0 0 10px; }
h2 { font-size: 18px; margin: 32px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0 0 10px; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f3f5f7; padding: 1px 4px; border-radius: 3px; }
.best-note, .note { color: var(--muted); margin: 6px 0; }
.best-mark { color: var(--best); }
.tied-mark { color: #8a6d00; }
table.compare td.tied { background: #fff6d6; }
table.compare small.spread { color: var(--muted); font-weight: normal; }
.scale-toggle { color: var(--muted); font-size: 13px; }
.table-wrap { overflow-x: auto; }
table.compare { border-collapse: collapse; width: 100%; }
table.compare th, table.compare td { padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
table.compare thead th { font-weight: 600; border-bottom: 2px solid #aab3bd; vertical-align: bottom; }
table.compare tbody th { overflow-wrap: anywhere; min-width: 12em; }
table.compare .num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
table.compare td.best { background: var(--best-bg); color: var(--best); font-weight: 600; }
table.compare thead th small { font-weight: normal; color: var(--muted); }
table.compare tr.run-oom, table.compare tr.run-error, table.compare tr.run-error-detail { background: #fff8f8; }
table.compare tr.run-oom > *, table.compare tr.run-error > * { border-bottom: none; }
table.compare tr.run-error-detail td { padding-top: 0; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: baseline; }
.status { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 12px; font-weight: 600; }
.status-ok { background: var(--best-bg); color: var(--best); }
.status-baseline { background: #eef1f4; color: var(--muted); }
table.compare tr.baseline { background: #fafbfc; font-style: italic; }
.status-oom, .status-error { background: var(--bad-bg); color: var(--bad); }
.error-message { color: var(--bad); font-size: 12px; white-space: pre-wrap; word-break: break-word; max-height: 12em; overflow: auto; margin: 4px 0 0; }
pre.error-message { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--bad-bg); padding: 6px 8px; border-radius: 4px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 18px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
figure.failed { border-color: #f1b5b5; background: #fffafa; }
figcaption { font-weight: 600; margin-bottom: 6px; }
.chart-box { position: relative; height: 280px; }
.chart-box.wide { height: 340px; }
.chart-box.tiers { height: 240px; margin-top: 8px; }
table.compare small.tiers, table.compare small.devices { color: var(--muted); font-weight: normal; }
table.stats.tiers thead td, table.stats.tiers thead th { color: var(--muted); padding-bottom: 0; }
table.stats th.num { text-align: right; }
.recommendation { border: 1px solid #b9d8c3; background: var(--best-bg); border-radius: 6px; padding: 8px 12px; margin: 0 0 12px; }
.recommendation ul, ul.notes { margin: 4px 0 0; padding-left: 20px; }
ul.notes { color: var(--muted); font-size: 13px; }
table.stats { border-collapse: collapse; margin-top: 8px; }
table.stats caption { text-align: left; color: var(--muted); padding-bottom: 2px; }
table.stats th, table.stats td { padding: 2px 10px 2px 0; text-align: left; font-weight: normal; }
table.stats td.num { text-align: right; font-variant-numeric: tabular-nums; }
footer { margin-top: 36px; color: var(--muted); font-size: 12px; }
`;
