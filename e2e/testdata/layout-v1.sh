#!/usr/bin/env bash
# Writes e2e/testdata/layout-v1.tar.gz: a data directory of the
# one-stream-per-queue layout, made by lmq-gateway at commit 61f8f84 (the
# last one before the shards). See layout-v1.README.md.
#
#   git clone -q <repo> /tmp/oldmain && (cd /tmp/oldmain && git checkout 61f8f84 &&
#       go build -o /tmp/lmq-gateway-old ./cmd/lmq-gateway)
#   OLD=/tmp/lmq-gateway-old e2e/testdata/layout-v1.sh
set -euo pipefail
OLD=${OLD:-/tmp/lmq-gateway-old}
HTTP=127.0.0.1:${HTTP_PORT:-18931}
out=$(cd "$(dirname "$0")" && pwd)/layout-v1.tar.gz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=$work/data
"$OLD" --data-dir "$data" --http-listen "$HTTP" --rpc-listen 127.0.0.1:0 \
	--nats-listen 127.0.0.1:${NATS_PORT:-18932} --max-payload 65536 --log-level warn &
pid=$!
base=http://$HTTP
for _ in $(seq 100); do curl -fs "$base/properties" >/dev/null && break; sleep 0.1; done

c() { curl -fsS "$@"; echo; }
q() { # percent-encode one path segment (ASCII names)
	local s=$1 out= ch i
	for ((i = 0; i < ${#s}; i++)); do
		ch=${s:i:1}
		case $ch in
		[a-zA-Z0-9._~-]) out+=$ch ;;
		*) out+=$(printf '%%%02X' "'$ch") ;;
		esac
	done
	echo "$out"
}

# The default-properties list.
c -X PUT -H 'content-type: application/json' "$base/properties" \
	--data '[["^def/",{"retry":5,"timeout":12}],["^acc/closed$",{"accum":2}]]'

# plain: own properties (a kept header), text, binary, a kept header, one nacked once.
c -X PATCH -H 'content-type: application/json' "$base/properties/plain" \
	--data '{"timeout":45,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["x-trace"]]]}}'
# The nacked one: pulled once, nacked (Lmq-Delivered 1); still the oldest.
c -X POST -H 'content-type: text/plain' "$base/messages/plain" --data-binary 'nacked-once'
id=$(curl -fsS -D - -o /dev/null "$base/messages/plain?t=1" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-lmq-message-id"{print $2}')
c -X POST "$base/messages/plain/$id?reply=nack"
c -X POST -H 'content-type: text/plain' "$base/messages/plain" --data-binary 'first'
printf '\x00\x01\x02\xff\xfe binary \x00' | curl -fsS -X POST -H 'content-type: application/octet-stream' "$base/messages/plain" --data-binary @-; echo
c -X POST -H 'content-type: application/json' -H 'x-trace: trace-42' "$base/messages/plain" --data-binary '{"k":"kept header"}'
# A body beyond --max-payload: stored in the Object Store, referenced from the message.
python3 -c 'import sys; sys.stdout.buffer.write(b"".join(b"%08d" % i for i in range(12500)))' |
	curl -fsS -X POST -H 'content-type: application/x-big' "$base/messages/plain" --data-binary @-; echo

# def/one: properties from the default list.
c -X POST "$base/messages/$(q def/one)" --data-binary 'def-1'
c -X POST "$base/messages/$(q def/one)" --data-binary 'def-2'

# A name with slashes and spaces, own properties.
sp='sensor/42/temp a b'
c -X PATCH -H 'content-type: application/json' "$base/properties/$(q "$sp")" --data '{"retry":3}'
c -X POST -H 'content-type: text/plain; charset=utf-8' "$base/messages/$(q "$sp")" --data-binary '21.5 °C'

# A 200-byte name: hashed in the old layout (stream, subjects, properties key).
long=long-$(printf 'n%.0s' $(seq 195))
c -X PATCH -H 'content-type: application/json' "$base/properties/$long" --data '{"retry":4}'
c -X POST "$base/messages/$long" --data-binary 'long-1'
c -X POST "$base/messages/$long" --data-binary 'long-2'

# An accumulating queue whose window closed: one compound message.
c -X POST -H 'content-type: text/plain' "$base/messages/$(q acc/closed)" --data-binary 'part-a'
c -X POST -H 'content-type: text/plain' "$base/messages/$(q acc/closed)" --data-binary 'part-b'
until curl -fsS "$base/queues/acc%2Fclosed" | grep -q '"size":1'; do sleep 0.2; done

# An open accumulation window (one hour) with two parts.
c -X PATCH -H 'content-type: application/json' "$base/properties/$(q acc/open)" --data '{"accum":3600}'
c -X POST -H 'content-type: text/plain' "$base/messages/$(q acc/open)" --data-binary 'open-a'
c -X POST -H 'content-type: text/plain' "$base/messages/$(q acc/open)" --data-binary 'open-b'

# A delayed message (ten years: still pending whenever the test runs), and one ready.
c -X POST -H 'content-type: text/plain' "$base/messages/delayed?delay=315000000" --data-binary 'later'
c -X POST -H 'content-type: text/plain' "$base/messages/delayed" --data-binary 'now'

# A message with a ttl (ten years).
c -X POST -H 'content-type: text/plain' "$base/messages/ttl?ttl=315360000" --data-binary 'expires-late'

# A dead letter: dead_letter, retry 0, pulled and nacked; one more waiting.
c -X PATCH -H 'content-type: application/json' "$base/properties/dead" --data '{"dead_letter":true,"retry":0}'
c -X POST -H 'content-type: text/plain' "$base/messages/dead" --data-binary 'died'
id=$(curl -fsS -D - -o /dev/null "$base/messages/dead?t=1" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-lmq-message-id"{print $2}')
c -X POST "$base/messages/dead/$id?reply=nack"
c -X POST -H 'content-type: text/plain' "$base/messages/dead" --data-binary 'alive'

# A queue with properties only, no messages.
c -X PATCH -H 'content-type: application/json' "$base/properties/$(q 'empty q')" --data '{"timeout":7}'

c "$base/queues"
# What the old gateway answered, for the test to compare with after the upgrade.
{
	printf '{"defaults":%s,"queues":%s,"props":{' "$(curl -fsS "$base/properties")" "$(curl -fsS "$base/queues")"
	sep=
	for n in plain def/one "$sp" "$long" acc/closed acc/open delayed ttl dead 'empty q'; do
		printf '%s"%s":%s' "$sep" "$n" "$(curl -fsS "$base/properties/$(q "$n")")"
		sep=,
	done
	printf '}}\n'
} | python3 -m json.tool --indent 1 >"$(dirname "$out")/layout-v1.observed.json"
kill -TERM $pid
wait $pid
rm -f "$data"/*.lock
tar -C "$work" -czf "$out" data
ls -l "$out"
