// Package core sits above shared/lib.
package core

import _ "example.com/house/shared/lib"
