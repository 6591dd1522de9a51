/**
 * Text helpers of the HTML report: escaping, counts, dates and the dash of a missing value.
 * @module
 */

/** Escapes text for HTML content and double- or single-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** What a cell shows for a value the run does not have. */
export const DASH = '\u2014';

/** A count rounded to an integer, with thousands separators. */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** An ISO date as `2026-11-25 15:24:00 UTC` (the text itself when it is no date). */
export function formatDate(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** The formatted value, or a dash when there is none. */
export function orDash<T>(value: T | null | undefined, format: (v: T) => string): string {
  return value === null || value === undefined ? DASH : format(value);
}
