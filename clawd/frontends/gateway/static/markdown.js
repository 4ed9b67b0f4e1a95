// markdown.js: a small, safe Markdown renderer for the web chat.
//
// render(text) returns HTML in which every character of `text` has been HTML-escaped
// before any Markdown mark became a tag, so nothing the model writes can become markup of
// its own: headings, lists (nested by indentation), block quotes, fenced code blocks,
// tables, rules, inline code, bold, italic, strike-through and links. Links keep http(s)
// and mailto targets only and open with rel="noopener noreferrer"; anything else stays
// text. An unclosed code fence (a reply still streaming) runs to the end of the text.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const HOLE = "\u0000"; // marks a placeholder; removed from the input first

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

function safeUrl(url) {
  return /^(https?:\/\/|mailto:)/i.test(url) ? url : null;
}

function anchor(url, label) {
  return `<a href="${url}" target="_blank" rel="noopener noreferrer">${label}</a>`;
}

// One block's text (already split from its block marks) as inline HTML.
export function inline(raw) {
  const holes = [];
  const hold = (html) => `${HOLE}${holes.push(html) - 1}${HOLE}`;
  let text = raw.replace(/(`+)([^`\n]|[^`\n][\s\S]*?[^`\n])\1(?!`)/g,
    (_, ticks, code) => hold(`<code>${escapeHtml(code.trim() || code)}</code>`));
  text = escapeHtml(text);
  text = text.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (whole, label, url) => {
    const target = safeUrl(url);
    return target ? hold(anchor(target, label)) : whole;
  });
  // bare addresses; an escaped quote or angle bracket ends one
  text = text.replace(/(^|[\s(]|&lt;)(https?:\/\/(?:(?!&(?:lt|gt|quot|#39);)[^\s<()])*[^\s<().,;:!?&])/g,
    (_, before, url) => before + hold(anchor(url, url)));
  text = text
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, "$1<strong>$2</strong>")
    .replace(/(^|[^*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![*\w])/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_(?=[^\s_])([^_\n]*?[^\s_])_(?!\w)/g, "$1<em>$2</em>")
    .replace(/~~(?=\S)([^~\n]*?\S)~~/g, "<del>$1</del>");
  // a hole may hold another (a link inside a code span cannot: code is held first)
  const fill = (s) => s.replace(new RegExp(`${HOLE}(\\d+)${HOLE}`, "g"), (_, n) => fill(holes[n]));
  return fill(text);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function indentOf(line) {
  return line.match(/^\s*/)[0].replace(/\t/g, "    ").length;
}

function startsBlock(line, next) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
    ITEM.test(line) || (line.includes("|") && next !== undefined && TABLE_RULE.test(next) &&
      next.includes("-"));
}

function cells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
}

function table(lines) {
  const head = cells(lines[0]);
  const align = cells(lines[1]).map((c) =>
    c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : "");
  const row = (tag, values) => "<tr>" + head.map((_, i) => {
    const cls = align[i] ? ` class="${align[i]}"` : "";
    return `<${tag}${cls}>${inline(values[i] ?? "")}</${tag}>`;
  }).join("") + "</tr>";
  const body = lines.slice(2).map((l) => row("td", cells(l))).join("");
  return `<div class="table"><table><thead>${row("th", head)}</thead>` +
    `<tbody>${body}</tbody></table></div>`;
}

function list(lines) {
  const base = indentOf(lines[0]);
  const ordered = /\d/.test(lines[0].match(ITEM)[2]);
  const items = [];
  for (const line of lines) {
    const m = line.match(ITEM);
    if (m && indentOf(line) <= base + 1 && /\d/.test(m[2]) === ordered) items.push([m[3]]);
    else items[items.length - 1].push(line.slice(Math.min(indentOf(line), base + 2)));
  }
  const body = items.map((rest) => {
    const [first, ...more] = rest;
    const nested = more.some((l) => l.trim());
    return `<li>${inline(first)}${nested ? render(more.join("\n")) : ""}</li>`;
  }).join("");
  if (!ordered) return `<ul>${body}</ul>`;
  const start = parseInt(lines[0].match(ITEM)[2], 10);
  return start === 1 ? `<ol>${body}</ol>` : `<ol start="${start}">${body}</ol>`;
}

// A light highlighter for code blocks: comments, strings, numbers and the keywords of the
// common languages, each an escaped span; everything else escaped as it is. Plain text,
// Markdown and diffs are left as they are.
const TOKEN = new RegExp([
  String.raw`(?<com>#[^\n]*|\/\/[^\n]*|\/\*[\s\S]*?\*\/|--[^\n]*)`,
  String.raw`(?<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|\`(?:\\.|[^\`\\])*\`)`,
  String.raw`(?<num>\b\d+(?:\.\d+)?\b)`,
  String.raw`(?<kw>\b(?:def|class|return|if|else|elif|for|while|in|import|from|as|with|try|` +
    String.raw`except|finally|raise|function|const|let|var|new|async|await|yield|lambda|pass|` +
    String.raw`break|continue|switch|case|default|export|fn|pub|struct|impl|use|match|func|` +
    String.raw`package|interface|type|select|where|insert|update|delete|create|table|` +
    String.raw`true|false|null|None|True|False|and|or|not|echo|then|fi|do|done)\b)`,
].join("|"), "g");
const PLAIN = new Set(["", "text", "txt", "plain", "md", "markdown", "diff", "console", "output"]);

function highlight(code, lang) {
  if (PLAIN.has(lang.toLowerCase())) return escapeHtml(code);
  // "--" starts a comment in SQL and Lua only; "#" not in JavaScript, CSS or Go
  const dashes = /^(sql|lua|haskell|hs)$/i.test(lang);
  const hashes = !/^(js|javascript|ts|typescript|css|go|c|cpp|java|rust|rs|json)$/i.test(lang);
  let out = "";
  let at = 0;
  for (const m of code.matchAll(TOKEN)) {
    const kind = Object.keys(m.groups).find((k) => m.groups[k] !== undefined);
    if (kind === "com" && ((m[0].startsWith("--") && !dashes) || (m[0][0] === "#" && !hashes))) {
      continue;
    }
    out += escapeHtml(code.slice(at, m.index)) +
      `<span class="tok-${kind}">${escapeHtml(m[0])}</span>`;
    at = m.index + m[0].length;
  }
  return out + escapeHtml(code.slice(at));
}

export function render(source) {
  const lines = String(source ?? "").split(HOLE).join("").replace(/\r\n?/g, "\n").split("\n");
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if ((m = line.match(FENCE))) {
      const close = new RegExp(`^ {0,3}${m[1][0]}{${m[1].length},}\\s*$`);
      const body = [];
      for (i += 1; i < lines.length && !close.test(lines[i]); i += 1) body.push(lines[i]);
      i += 1;
      const lang = m[2] ? ` class="lang-${escapeHtml(m[2])}"` : "";
      out.push(`<pre><code${lang}>${highlight(body.join("\n"), m[2] || "")}</code></pre>`);
    } else if (!line.trim()) {
      i += 1;
    } else if ((m = line.match(HEADING))) {
      out.push(`<h${m[1].length}>${inline(m[2])}</h${m[1].length}>`);
      i += 1;
    } else if (RULE.test(line)) {
      out.push("<hr>");
      i += 1;
    } else if (QUOTE.test(line)) {
      const body = [];
      for (; i < lines.length && QUOTE.test(lines[i]); i += 1) body.push(lines[i].replace(QUOTE, ""));
      out.push(`<blockquote>${render(body.join("\n"))}</blockquote>`);
    } else if (ITEM.test(line)) {
      const base = indentOf(line);
      const ordered = /\d/.test(line.match(ITEM)[2]);
      const body = [line];
      for (i += 1; i < lines.length; i += 1) {
        const next = lines[i];
        const item = next.match(ITEM);
        if (item && indentOf(next) <= base && /\d/.test(item[2]) !== ordered) break;
        if (!next.trim()) {
          const after = lines[i + 1];
          if (after === undefined || !(ITEM.test(after) || indentOf(after) > base)) break;
        } else if (indentOf(next) <= base && !ITEM.test(next)) break;
        body.push(next);
      }
      out.push(list(body.filter((l) => l.trim())));
    } else if (startsBlock(line, lines[i + 1])) { // a table
      const body = [line, lines[i + 1]];
      for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim(); i += 1) {
        body.push(lines[i]);
      }
      out.push(table(body));
    } else {
      const body = [line];
      for (i += 1; i < lines.length && lines[i].trim() && !startsBlock(lines[i], lines[i + 1]);
        i += 1) body.push(lines[i]);
      out.push(`<p>${body.map(inline).join("<br>")}</p>`);
    }
  }
  return out.join("\n");
}
