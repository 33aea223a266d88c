'use strict';
// Used by scripts/dist.js (the README the package carries) and scripts/test-dist.js (its checks).

/** Where a published file of `name@version` is served: unpkg serves every file of every package on
 *  the npm registry. */
const publishedPrefix = (name, version) => `https://unpkg.com/${name}@${version}/`;

/** Whether a link target is relative to the README's place (not a URL, not //host, not #anchor). */
const isRelativeLink = (href) => !/^[a-z][a-z0-9+.-]*:|^\/\/|^#/i.test(href);

/** The link and image targets of a markdown text, as markdown-it reads them (text in code is not a link). */
function markdownLinks(text) {
  const MarkdownIt = require('markdown-it');
  const targets = [];
  const walk = (tokens) => {
    for (const t of tokens) {
      if (t.type === 'link_open') targets.push(t.attrGet('href'));
      if (t.type === 'image') targets.push(t.attrGet('src'));
      if (t.children) walk(t.children);
    }
  };
  walk(new MarkdownIt({ html: true }).parse(text, {}));
  return targets;
}

module.exports = { markdownLinks, publishedPrefix, isRelativeLink };
