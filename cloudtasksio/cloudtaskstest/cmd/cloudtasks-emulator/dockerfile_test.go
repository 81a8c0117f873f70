package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No Docker engine runs here, so the Dockerfile is never built in tests; this
// checks what can go stale without one: the package it builds is this one,
// and its Go image is at least the go line of go.mod.
func TestDockerfileBuildsThisCommandWithTheModulesGo(t *testing.T) {
	df, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	root := filepath.Join("..", "..", "..", "..")
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)

	build := regexp.MustCompile(`(?m)^RUN .*go build .* (\./\S+)$`).FindSubmatch(df)
	require.NotNil(t, build, "a RUN line builds a package")
	pkgDir, err := filepath.Abs(filepath.Join(root, string(build[1])))
	require.NoError(t, err)
	here, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, here, pkgDir, "the Dockerfile builds this command")

	image := regexp.MustCompile(`(?m)^FROM golang:(\d+)\.(\d+)`).FindSubmatch(df)
	require.NotNil(t, image, "the build stage uses a golang:MAJOR.MINOR image")
	goLine := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(mod)
	require.NotNil(t, goLine)
	assert.GreaterOrEqual(t, atoi(t, image[1])*1000+atoi(t, image[2]), atoi(t, goLine[1])*1000+atoi(t, goLine[2]),
		"golang image %s.%s is older than go.mod's go %s.%s", image[1], image[2], goLine[1], goLine[2])
	assert.True(t, strings.Contains(string(df), "ENV HOST=0.0.0.0"), "the image listens on all interfaces")
}

func atoi(t *testing.T, b []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(b))
	require.NoError(t, err)
	return n
}
