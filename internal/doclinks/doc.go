// Package doclinks holds no code. Its tests keep the links between the project's markdown
// pages working, files and anchors alike, so that a page split or a heading renamed cannot
// leave a link pointing nowhere; and they keep CHANGELOG.md's newest version the one the
// README pins and the Python wrapper carries.
package doclinks
