package x

import _ "example.com/house/core"
