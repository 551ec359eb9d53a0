#!/usr/bin/env bash
# The public API of the redlimit crate as a checked-in text file, so that any
# change of the public surface is a visible diff.
#
#   scripts/public-api.sh          check: fail with a diff when the API differs
#   scripts/public-api.sh --bless  rewrite ratelimit/public-api.txt
#
# It reads the HTML `cargo doc` writes (every feature on, no private items):
# each item `all.html` lists, with its declaration, and on the item's page its
# fields, variants, methods, associated constants and types, and the traits it
# implements (auto traits included, blanket impls left out). `#[doc(hidden)]`
# items are not in rustdoc's output, so not here. Rustdoc's HTML can change
# between toolchains: bless with the toolchain CI uses.
set -euo pipefail
cd "$(dirname "$0")/.."

snapshot=ratelimit/public-api.txt
doc=${CARGO_TARGET_DIR:-target}/doc/redlimit

RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc -p redlimit --all-features --no-deps --quiet

# HTML on one line, tags dropped, entities decoded, spaces squeezed.
text() {
    sed -e 's|<a class="src[^"]*"[^>]*>Source</a>||g; s|<a [^>]*class="anchor[^"]*"[^>]*>§</a>||g; s|ⓘ||g' \
        -e 's|<br>| |g; s|</div>| |g' \
        -e 's/<[^>]*>//g' \
        -e 's/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&#39;/'"'"'/g; s/&nbsp;/ /g; s/&amp;/\&/g' \
        -e 's/[[:space:]]\+/ /g; s/^ //; s/ $//'
}

# One page: its item's declaration, then one line per member and trait impl.
page() {
    local file=$1 path kind name
    kind=$(basename "$file" | cut -d. -f1)
    name=$(basename "$file" | cut -d. -f2)
    path=$(dirname "${file#"$doc"}" | sed 's|^/\?|redlimit/|; s|/\.$||; s|/$||; s|/|::|g')::$name
    local html
    html=$(tr '\n' ' ' <"$file")
    local decl
    decl=$(grep -o '<pre class="rust item-decl">.*</pre>' <<<"$html" | sed 's|</pre>.*||' | text || true)
    case $kind in
        struct | enum | union | trait) decl=$(sed 's/ *{.*//; s/;$//' <<<"$decl") ;;
    esac
    echo "$kind $path: $decl"
    # Members, up to the trait implementations: one per line, id then signature.
    local members=${html%%<h2 id=\"trait-implementations\"*}
    members=${members%%<h2 id=\"synthetic-implementations\"*}
    members=${members%%<h2 id=\"blanket-implementations\"*}
    members=${members%%<h2 id=\"implementors\"*}
    members=${members%%<h2 id=\"foreign-impls\"*}
    members=${members%%<h2 id=\"dyn-compatibility\"*}
    sed 's/<section id="/\n&/g; s/<span id="structfield\./\n&/g; s/<div id="variant\./\n&/g' <<<"$members" |
        sed -n -E 's/^<(section|span|div) id="((method|tymethod|associatedconstant|associatedtype|structfield|variant)\.[^"]*)"(.*)$/\2\t\4/p' |
        while IFS=$'\t' read -r id rest; do
            local sig
            sig=$(sed 's|</h4>.*||; s|</h3>.*||; s|</code>.*||; s|^[^>]*>||' <<<"$rest" | text | sed 's/^§ *//')
            echo "    $id: $sig"
        done
    # Trait implementations (written and auto), by their headers.
    local impls=${html#*<h2 id=\"trait-implementations\"}
    [ "$impls" = "$html" ] && impls=${html#*<h2 id=\"synthetic-implementations\"}
    [ "$impls" = "$html" ] && return 0
    impls=${impls%%<h2 id=\"blanket-implementations\"*}
    sed 's/<h3 class="code-header">/\n&/g' <<<"$impls" | sed -n 's|^<h3 class="code-header">\(.*\)|\1|p' |
        sed 's|</h3>.*||' | text | sed 's/^/    /'
}

generate() {
    grep -o '<li><a href="[^"]*">' "$doc/all.html" | sed 's/<li><a href="//; s/">//' | sort -u |
        while read -r item; do page "$doc/$item"; done
}

if [ "${1:-}" = "--bless" ]; then
    generate >"$snapshot"
    echo "wrote $snapshot ($(wc -l <"$snapshot") lines)"
    exit 0
fi
if ! diff -u "$snapshot" <(generate); then
    echo >&2 "The public API of redlimit changed (diff above: - checked in, + now)."
    echo >&2 "If the change is intended, run scripts/public-api.sh --bless and commit $snapshot."
    exit 1
fi
echo "public API unchanged ($(wc -l <"$snapshot") lines in $snapshot)"
