package gatekeeper

//go:generate go run ./internal/deploygen
