package core

import "testing"

func TestNothing(t *testing.T) {}
