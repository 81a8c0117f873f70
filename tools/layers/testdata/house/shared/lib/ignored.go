//go:build ignore

package lib

import _ "example.com/house/shared/app"
