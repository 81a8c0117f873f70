package cloudtasksio

import (
	"fmt"
	"strconv"
	"strings"
)

// parseEndpoint checks an emulator endpoint of the form host:port. The string is split at its
// last ':' (so a bracketed IPv6 host works), the host must be non-empty, nothing may contain
// whitespace, and the port must be a decimal number in 1..65535.
func parseEndpoint(field, endpoint string) (host string, port int, err error) {
	bad := func(why string) error {
		return fmt.Errorf("cloudtasksio: %s %q is not host:port: %s", field, endpoint, why)
	}
	if strings.IndexFunc(endpoint, isSpace) >= 0 {
		return "", 0, bad("it contains whitespace")
	}
	i := strings.LastIndexByte(endpoint, ':')
	if i < 0 {
		return "", 0, bad("there is no ':'")
	}
	host, portText := endpoint[:i], endpoint[i+1:]
	if host == "" {
		return "", 0, bad("the host is empty")
	}
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") {
		return "", 0, bad("the IPv6 host is not bracketed")
	}
	if strings.Contains(strings.Trim(host, "[]"), "/") {
		return "", 0, bad("the host contains '/'")
	}
	if portText == "" || len(portText) > 5 || strings.TrimLeft(portText, "0123456789") != "" {
		return "", 0, bad("the port is not a number in 1..65535")
	}
	port, _ = strconv.Atoi(portText)
	if port < 1 || port > 65535 {
		return "", 0, bad("the port is not a number in 1..65535")
	}
	return host, port, nil
}
