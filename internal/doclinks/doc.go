// Package doclinks holds no code: its test keeps the links between the project's markdown
// pages working, files and anchors alike, so that a page split or a heading renamed cannot
// leave a link pointing nowhere.
package doclinks
