package e2e

import _ "example.com/house/shared/app"
