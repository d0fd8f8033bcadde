/**
 * The dashboard's stylesheet and its one small script, served from `<basePath>/assets/` so the
 * page's CSP can forbid inline script and style.
 * @module
 */

export const STYLE = `
*{box-sizing:border-box}
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1a202c;background:#f7fafc}
header{background:#1a202c;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:baseline}
header a{color:#e2e8f0;text-decoration:none}header a:hover{text-decoration:underline}
header strong{font-size:16px;margin-right:8px}
header .who{margin-left:auto;color:#a0aec0;font-size:12px}
main{padding:12px 16px;max-width:1200px}
h1{font-size:20px;margin:8px 0 12px}h2{font-size:16px;margin:20px 0 8px}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #e2e8f0;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#edf2f7;font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code,pre,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
pre{background:#fff;border:1px solid #e2e8f0;padding:8px;overflow:auto;max-height:400px;white-space:pre-wrap;word-break:break-all}
.sev-ok{color:#2f855a}.sev-warn{color:#b7791f;font-weight:600}.sev-error{color:#c53030;font-weight:600}
.warnings{list-style:none;padding:0;margin:0}
.warnings li{border-left:4px solid #b7791f;background:#fffaf0;padding:6px 10px;margin:4px 0}
.warnings li.error{border-color:#c53030;background:#fff5f5}
.ok-box{border-left:4px solid #2f855a;background:#f0fff4;padding:6px 10px}
.notice{border-left:4px solid #3182ce;background:#ebf8ff;padding:6px 10px;margin:8px 0}
.failure{border-left:4px solid #c53030;background:#fff5f5;padding:6px 10px;margin:8px 0}
.tabs{display:flex;gap:4px;flex-wrap:wrap;margin:8px 0}
.tabs a{padding:4px 10px;border:1px solid #cbd5e0;border-radius:4px;background:#fff;text-decoration:none;color:#2d3748}
.tabs a.on{background:#2d3748;color:#fff}
form.filters{display:flex;gap:8px;flex-wrap:wrap;align-items:end;background:#fff;border:1px solid #e2e8f0;padding:8px}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:#4a5568}
input,select,button{font:inherit;padding:3px 6px}
button{cursor:pointer;border:1px solid #a0aec0;border-radius:4px;background:#fff}
button.danger{border-color:#c53030;color:#c53030}
.actions{display:flex;gap:6px;flex-wrap:wrap;align-items:center;margin:8px 0}
.actions span{color:#4a5568;font-size:12px}
.status-dead,.status-cancelled{color:#c53030}.status-succeeded{color:#2f855a}.status-retrying{color:#b7791f}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;background:#fff;border:1px solid #e2e8f0;padding:8px;margin:0}
dl.meta dt{color:#4a5568}dl.meta dd{margin:0}
.charts{display:flex;gap:16px;flex-wrap:wrap}
.chart{background:#fff;border:1px solid #e2e8f0;display:block}
figure{margin:0}figcaption{font-size:12px;color:#4a5568;margin:0 0 2px}
td.mono{white-space:nowrap}
.muted{color:#718096}
`;

/** "Select all" for the job list's checkboxes. The only script; the pages work without it. */
export const SCRIPT = `document.addEventListener('change',function(e){var t=e.target;if(t&&t.id==='select-all'){document.querySelectorAll('input[name="id"]').forEach(function(b){b.checked=t.checked})}});`;
