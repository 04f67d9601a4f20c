package main

// The image has no operating system; when it (or any machine) has no CA
// bundle, Git and Helm over HTTPS verify against Mozilla's roots, built in.
// Roots the system has always take precedence.
import _ "golang.org/x/crypto/x509roots/fallback"
