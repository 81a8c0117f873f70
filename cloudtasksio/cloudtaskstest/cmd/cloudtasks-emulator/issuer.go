// This file checks the -openid-issuer value, and shows it in errors without the parts of a
// URL that may hold a credential.

package main

import (
	"net/url"
	"strconv"
	"strings"
)

// issuerListenPort checks an -openid-issuer value and returns the port its
// discovery document is served on. An OpenID issuer is an http(s) URL with a
// host, an optional path, and no user info, query or fragment; its port must
// be fixed, since clients find the keys through it.
func issuerListenPort(s setting) (string, error) {
	issuer, shown := s.value, setting{value: issuerShown(s.value), from: s.from}
	bad := func(why string) error {
		return shown.badf("%s; want an http(s) URL such as http://localhost:8980", why)
	}
	u, err := url.Parse(issuer)
	switch {
	case err != nil:
		return "", bad("not a URL")
	case u.User != nil:
		return "", bad("user info is not allowed")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad("the scheme is not http or https")
	case u.Hostname() == "":
		return "", bad("no host")
	case u.RawQuery != "" || u.ForceQuery:
		return "", bad("a query is not allowed")
	case u.Fragment != "" || strings.Contains(issuer, "#"):
		return "", bad("a fragment is not allowed")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", bad("the port must be 1 to 65535")
	}
	return port, nil
}

// hidden replaces the parts of an issuer URL an error leaves out, as net/url's Redacted does
// for a password.
const hidden = "xxxxx"

// issuerShown returns an -openid-issuer value as an error may repeat it: its user info, query
// and fragment, any of which may hold a credential (?token=...), are replaced by hidden. It
// reads the text, not a parsed URL, so that a value which does not parse is not repeated whole
// either: the query or fragment starts at the first '?' or '#', and the user info is what lies
// between "//" (or the start) and the last '@' before it. A path holding an '@' is hidden up
// to it too, which costs a reader some context and leaks nothing.
func issuerShown(issuer string) string {
	tail := ""
	if i := strings.IndexAny(issuer, "?#"); i >= 0 {
		issuer, tail = issuer[:i], issuer[i:i+1]+hidden
	}
	if at := strings.LastIndexByte(issuer, '@'); at >= 0 {
		start := 0
		if i := strings.Index(issuer[:at], "//"); i >= 0 {
			start = i + len("//")
		}
		issuer = issuer[:start] + hidden + issuer[at:]
	}
	return issuer + tail
}
