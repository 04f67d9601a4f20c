#!/usr/bin/env bash
# The GitHub Action's body (action.yml): runs `truce check` on the checkout,
# writes SARIF for code scanning and a verdict table to the job summary, and
# exits with truce's status (0 settles, 1 found something, 2 error).
#
# Inputs come as GitHub passes them, INPUT_* (action.yml maps them):
#   INPUT_PATHS    directories or files to check, whitespace-separated (default .)
#   INPUT_CLUSTER  directories for -c, whitespace-separated
#   INPUT_ARGS     more flags for truce check, whitespace-separated
#   INPUT_SARIF    where the SARIF goes (default truce.sarif)
#   INPUT_FORMAT   another format to write as well (junit, json, html, text),
#                  by a second run, to INPUT_REPORT (default truce.<ext>)
#   INPUT_TRUCE    a truce binary to use (the Kyverno helper truce-kyverno
#                  beside it, as in a release archive); empty builds the
#                  action's own source, and the helper when the paths
#                  mention Kyverno
# and writes sarif=, report= and exit-code= to $GITHUB_OUTPUT and the
# summary to $GITHUB_STEP_SUMMARY (both optional, for running it by hand).
set -uo pipefail

paths=${INPUT_PATHS:-.}
sarif=${INPUT_SARIF:-truce.sarif}
format=${INPUT_FORMAT:-}
truce=${INPUT_TRUCE:-}
summary=${GITHUB_STEP_SUMMARY:-/dev/null}
output=${GITHUB_OUTPUT:-/dev/null}
tmp=$(mktemp -d "${RUNNER_TEMP:-/tmp}/truce-action.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [[ -z $truce ]]; then
	# The action's checkout is the source of the version the workflow pinned.
	src=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}
	truce="${RUNNER_TEMP:-$tmp}/truce"
	echo "::group::Building truce from $src"
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$truce" ./cmd/truce) || {
		echo "::error::building truce failed"
		echo "exit-code=2" >>"$output"
		exit 2
	}
	echo "::endgroup::"
	# Kyverno's policies run in a helper of its own module, which truce
	# finds beside itself: built only when the paths mention Kyverno (its
	# policies, its chart), since it takes minutes on a cold cache.
	read -ra look <<<"$(echo "$paths ${INPUT_CLUSTER:-}" | tr '\n' ' ')"
	if grep -rqsil --include='*.yaml' --include='*.yml' --include='*.json' kyverno -- "${look[@]}"; then
		echo "::group::Building the Kyverno helper from $src"
		(cd "$src/engine/kyverno/helper" && CGO_ENABLED=0 go build -trimpath -o "$(dirname "$truce")/truce-kyverno" ./cmd/truce-kyverno) || {
			echo "::error::building the Kyverno helper failed"
			echo "exit-code=2" >>"$output"
			exit 2
		}
		echo "::endgroup::"
	fi
fi

read -ra args <<<"$(echo "$paths" | tr '\n' ' ')"
read -ra clusters <<<"$(echo "${INPUT_CLUSTER:-}" | tr '\n' ' ')"
for c in ${clusters[@]+"${clusters[@]}"}; do
	args+=(-c "$c")
done
read -ra extra <<<"$(echo "${INPUT_ARGS:-}" | tr '\n' ' ')"
args+=(${extra[@]+"${extra[@]}"})

echo "truce check ${args[*]}"
# A SARIF left by an earlier step must not be uploaded as this run's.
rm -f "$sarif"
"$truce" check "${args[@]}" --format sarif --output "$sarif" 2>"$tmp/stderr"
code=$?
cat "$tmp/stderr" >&2

report=
if [[ -n $format && $code -ne 2 ]]; then
	case $format in
	junit) ext=xml ;;
	text) ext=txt ;;
	*) ext=$format ;;
	esac
	report=${INPUT_REPORT:-truce.$ext}
	"$truce" check "${args[@]}" --format "$format" --output "$report" >/dev/null
	rc=$?
	# The two runs agree unless something failed on the way.
	if [[ $rc -eq 2 ]]; then code=2; fi
fi

{
	echo "sarif=$([[ -f $sarif ]] && echo "$sarif")"
	echo "report=$report"
	echo "exit-code=$code"
} >>"$output"

{
	echo "## truce check"
	echo
	if [[ $code -eq 2 || ! -f $sarif ]]; then
		echo "truce could not check \`${paths}\` (exit $code):"
		echo
		echo '```'
		tail -n 20 "$tmp/stderr"
		echo '```'
	elif ! command -v jq >/dev/null; then
		echo "Exit $code; the findings are in \`$sarif\` (jq is needed for this table)."
	else
		# One row per simulated tool and unit, as truce's text summary; an
		# object is Synced when no result names it.
		jq -r '
		  def esc: tostring | gsub("\\|"; "\\|") | gsub("\n"; " ");
		  def verdicts: ["Loop", "OutOfSync", "Rejected", "Pruned", "Unpredictable"];
		  [.runs[] as $run | ($run.properties.simulations // [])[] as $s
		   | [$run.results[]? | select(.properties.tool == $s.tool and .properties.unit == $s.unit and .properties.verdict != null)] as $r
		   | ([verdicts[] as $v | [$r[] | select(.properties.verdict == $v)] | length]) as $counts
		   | [$s.tool, ($s.unit // "" | if . == "" then "(defaults)" else . end), $s.objects] + $counts] as $rows
		  | if ($rows | length) == 0 then "Nothing was simulated." else
		    ("| Tool | Unit | Objects | " + (verdicts | join(" | ")) + " | Synced |"),
		    "|---|---|--:|--:|--:|--:|--:|--:|--:|",
		    ($rows[] | "| \(.[0]|esc) | \(.[1]|esc) | \(.[2:] | map(tostring) | join(" | ")) | \(.[2] - (.[3:] | add)) |")
		    end
		' "$sarif"
		echo
		jq -r '
		  def esc: tostring | gsub("\\|"; "\\|") | gsub("\n"; " ");
		  [.runs[].results[]?] as $all
		  | if ($all | length) == 0 then "Every object settles." else
		    "| Verdict or rule | Object | Where | What |",
		    "|---|---|---|---|",
		    ($all[:200][] | . as $r | ($r.locations[0].physicalLocation // {}) as $l
		     | "| \(($r.properties.verdict // $r.ruleId) | esc) | \(($r.properties.object // "") | esc) | \(($l.artifactLocation.uri // "") | esc)\(if $l.region.startLine then ":\($l.region.startLine)" else "" end) | \(($r.message.text // "")[:300] | esc) |"),
		    (if ($all | length) > 200 then "", "… and \(($all | length) - 200) more in the SARIF file." else empty end)
		    end
		' "$sarif"
	fi
	echo
} >>"$summary"

exit "$code"
