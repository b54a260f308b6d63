// Reads a JSON list of answers' headers on stdin ({"name": "value"}, names
// in lower case) and prints, for each, what two clients' packages make of
// them, as one JSON list:
//   - parser: ratelimit-header-parser's reading (it reads draft 7's
//     RateLimit, RateLimit-Limit/-Remaining/-Reset and X-RateLimit-*):
//     limit, remaining, and the reset as milliseconds from now (reset_in_ms:
//     the parser turns seconds into a Date on this clock) and as a Unix time
//     in milliseconds (reset_ms), null when it read none;
//   - sf: structured-headers' reading of RateLimit-Policy and RateLimit,
//     as Lists of Items (draft 10) and, if RateLimit is not one, as draft
//     7's Dictionary: [value, {parameter: value}] for each member.
// A field either cannot parse is reported as {"error": message}.
import { parseRateLimit } from "ratelimit-header-parser";
import { parseList, parseDictionary } from "structured-headers";

const input = JSON.parse(await new Promise((resolve, reject) => {
  let data = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk) => { data += chunk; });
  process.stdin.on("end", () => resolve(data));
  process.stdin.on("error", reject);
}));

// plain turns a structured-headers bare item into JSON: a String, an
// Integer or a Boolean as itself, anything else (a Token, a Byte Sequence,
// a Date) as {"type": its class, "value": its text}, so that a name that
// should be a String cannot pass for one.
const plain = (v) => (["string", "number", "boolean"].includes(typeof v) ? v : { type: v?.constructor?.name, value: String(v) });

const item = ([value, params]) => [plain(value), Object.fromEntries([...params].map(([k, v]) => [k, plain(v)]))];

function sf(value, parse) {
  if (value === undefined) return null;
  try {
    return parse(value);
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
}

const out = input.map((headers) => {
  const now = Date.now();
  const r = parseRateLimit(headers);
  const reset = r?.reset;
  const valid = reset instanceof Date && !Number.isNaN(reset.getTime());
  return {
    parser: r === undefined ? null : {
      limit: r.limit,
      remaining: r.remaining,
      reset_ms: valid ? reset.getTime() : null,
      reset_in_ms: valid ? reset.getTime() - now : null,
    },
    sf: {
      policy: sf(headers["ratelimit-policy"], (v) => parseList(v).map(item)),
      ratelimit: sf(headers["ratelimit"], (v) => parseList(v).map(item)),
      ratelimit_dictionary: sf(headers["ratelimit"], (v) => [...parseDictionary(v)].map(([k, m]) => [k, ...item(m)])),
    },
  };
});
// NaN is not JSON: a figure the parser could not read is printed as the
// string "NaN", which the Go side reports as such.
process.stdout.write(JSON.stringify(out, (_, v) => (typeof v === "number" && Number.isNaN(v) ? "NaN" : v)) + "\n");
