/**
 * The start of a self-contained HTML page (the compare and replay report, the doctor's): the
 * document's head, with its styles inlined, up to the opening of the body.
 * @module
 */
import { escapeHtml } from './report-text.js';

/** `<!DOCTYPE html>` to `<body>` (and the line break after it); generator and title are escaped here. */
export function pageStart(generator: string, title: string, style: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="${escapeHtml(generator)}">
<title>${escapeHtml(title)}</title>
<style>${style}</style>
</head>
<body>
`;
}
