/**
 * Well-formed UTF-16: what can cross UTF-8 (a JSON body, a URL, a log line)
 * and come back the same string.
 */

/**
 * Whether a UTF-16 string holds a lone surrogate: a high surrogate not
 * followed by a low one, or a low one not after a high one. No UTF-8 text can
 * hold one (encoders write U+FFFD instead), so such a string does not survive
 * a URL or UTF-8 text unchanged.
 *
 * @example
 * hasLoneSurrogate("\ud83d\ude00") // false (one emoji, a pair)
 * hasLoneSurrogate("a\ud800") // true
 */
export function hasLoneSurrogate(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    if (c >= 0xdc00) return true;
    const d = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
    if (d < 0xdc00 || d > 0xdfff) return true;
    i++;
  }
  return false;
}
