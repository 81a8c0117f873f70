// Package app is an application on core.
package app

import _ "example.com/house/core"
