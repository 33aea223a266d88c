'use strict';
// Used by scripts/dist.js (the README the package carries) and scripts/test-dist.js (its checks).

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

module.exports = { markdownLinks };
