package core_test

import (
	_ "example.com/house/core"
	_ "example.com/house/shared/app"
)
