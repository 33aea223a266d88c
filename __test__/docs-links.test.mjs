// The docs stay navigable: every relative link in README.md, docs/*.md and bench/README.md names a
// file or folder of the repository, and every #anchor names a heading of the target as GitHub ids
// it (github-slugger: lowercased, punctuation other than hyphens and spaces dropped, spaces to
// hyphens, a repeated heading's id suffixed -1, -2, …). Markdown is parsed with markdown-it, so
// text inside code blocks and code spans is not taken for a link.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import MarkdownIt from 'markdown-it';
import GithubSlugger from 'github-slugger';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const markdown = new MarkdownIt({ html: true });

/** The pages checked: the README, every page under docs/, and the benchmark's method page. */
function checkedPages() {
  const docs = fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort();
  return ['README.md', ...docs.map((f) => path.join('docs', f)), path.join('bench', 'README.md')];
}

/** A heading's text as GitHub renders it (markup dropped, code spans' text kept). */
function headingText(inline) {
  return inline.children
    .map((t) => (t.type === 'text' || t.type === 'code_inline' ? t.content : t.type === 'image' ? headingText(t) : ''))
    .join('');
}

/** The anchors GitHub gives a markdown file's headings, in document order. */
function anchorsOf(file, cache) {
  if (!cache.has(file)) {
    const tokens = markdown.parse(fs.readFileSync(file, 'utf8'), {});
    const slugger = new GithubSlugger();
    const anchors = new Set();
    tokens.forEach((t, i) => {
      if (t.type === 'heading_open') anchors.add(slugger.slug(headingText(tokens[i + 1])));
    });
    cache.set(file, anchors);
  }
  return cache.get(file);
}

/** Every link and image target of a markdown file, with its line (1-based). */
function linksOf(file) {
  const links = [];
  const walk = (tokens, first) => {
    let line = first; // an inline token's children: a line break moves to the next line
    for (const t of tokens) {
      if (t.map) line = t.map[0] + 1;
      if (t.type === 'softbreak' || t.type === 'hardbreak') line += 1;
      if (t.type === 'link_open') links.push({ target: t.attrGet('href'), line });
      if (t.type === 'image') links.push({ target: t.attrGet('src'), line });
      if (t.children) walk(t.children, line);
    }
  };
  walk(markdown.parse(fs.readFileSync(file, 'utf8'), {}), 1);
  return links;
}

/**
 * The broken relative links of one markdown file: each as "line N: target: why". Links with a
 * scheme (https:, mailto:) are not followed.
 */
function brokenLinks(file, { root = ROOT, cache = new Map() } = {}) {
  const broken = [];
  for (const { target, line } of linksOf(file)) {
    if (/^[a-z][a-z0-9+.-]*:|^\/\//i.test(target)) continue;
    const hash = target.indexOf('#');
    const ref = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
    const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
    const resolved = ref === '' ? file : path.resolve(path.dirname(file), ref);
    const why = (() => {
      if (ref.startsWith('/')) return 'absolute path (GitHub resolves it against the site, not the repository)';
      if (path.relative(root, resolved).startsWith('..')) return 'outside the repository';
      if (!fs.existsSync(resolved)) return 'no such file';
      if (anchor === null) return null;
      if (!resolved.endsWith('.md')) return 'an anchor into a file that is not markdown';
      if (!anchorsOf(resolved, cache).has(anchor)) return `no heading with the anchor #${anchor}`;
      return null;
    })();
    if (why) broken.push(`line ${line}: ${target}: ${why}`);
  }
  return broken;
}

for (const page of checkedPages()) {
  test(`every relative link and #anchor in ${page} resolves`, () => {
    assert.deepEqual(brokenLinks(path.join(ROOT, page)), [], `broken links in ${page}`);
  });
}

test('the checker reports a missing file, a missing anchor, and ids GitHub gives repeated and punctuated headings', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'docs-links-'));
  try {
    fs.writeFileSync(path.join(dir, 'target.md'), [
      '# Target', '## Usage', '## Usage', '## Reconnect storm (`bench/storm.js`, `npm run bench -- --storm`)',
      '```', '## not a heading', '```', ''].join('\n'));
    fs.writeFileSync(path.join(dir, 'page.md'), [
      '[ok](target.md) [ok](target.md#usage) [ok](target.md#usage-1)',
      '[ok](target.md#reconnect-storm-benchstormjs-npm-run-bench------storm) [ok](#page) [ok](https://example.org/x.md)',
      '# Page',
      '[gone](missing.md)',
      '[gone](target.md#usage-2)',
      '[gone](target.md#reconnect-storm-benchstormjs-npm-run-bench----storm)',
      '[gone](target.md#not-a-heading)',
      '[gone](#nowhere)',
      '`[code, not a link](missing.md)`',
      ''].join('\n'));
    assert.deepEqual(brokenLinks(path.join(dir, 'page.md'), { root: dir }), [
      'line 4: missing.md: no such file',
      'line 5: target.md#usage-2: no heading with the anchor #usage-2',
      'line 6: target.md#reconnect-storm-benchstormjs-npm-run-bench----storm: no heading with the anchor #reconnect-storm-benchstormjs-npm-run-bench----storm',
      'line 7: target.md#not-a-heading: no heading with the anchor #not-a-heading',
      'line 8: #nowhere: no heading with the anchor #nowhere',
    ]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
