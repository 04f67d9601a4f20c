// Package builtin holds what package admission needs of kube-apiserver's
// built-in resources: every API group registered in the legacy scheme (as
// the server imports them), the upstream registry strategies of the
// resources truce validates exactly like the server (StrategyFor), and the
// Service registry, whose allocation hooks answer as a server-side dry run
// does (NewServiceStore).
package builtin
