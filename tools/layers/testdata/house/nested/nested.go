package nested

import _ "example.com/house/core"
