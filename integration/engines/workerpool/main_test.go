package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestThePoolListensOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		lis, err := listenLoopback(addr)
		if addr == "[::1]:0" && err != nil {
			t.Logf("no IPv6 loopback here: %v", err)
			continue
		}
		require.NoError(t, err, addr)
		lis.Close()
	}
	for _, addr := range []string{"", ":0", "0.0.0.0:0", "192.0.2.1:0", "example.com:0", "127.0.0.1"} {
		_, err := listenLoopback(addr)
		require.Error(t, err, "%q", addr)
		assert.Contains(t, err.Error(), "-addr", "%q: the error names the flag", addr)
	}
}
