package old

import _ "example.com/house/core"
