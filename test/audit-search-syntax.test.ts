// The audit search syntax (docs/api.md 4, "Search syntax (`q=`)"), parsed alone: what each query
// means as typed terms, and what each refusal says. No server: the HTTP side is
// audit-search.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseAuditSearch, type AuditSearch } from '../src/modules/audit/audit.search.js';

const day = (d: string) => `${d}T00:00:00+00:00`;

const ACCEPTED: Array<[q: string, search: AuditSearch, why?: string]> = [
  ['', {}, 'an empty query is no search'],
  ['   ', {}, 'blanks alone are no search'],
  ['action:LOGIN_SUCCESS', { action: { any: ['LOGIN_SUCCESS'], not: [] } }],
  ['action:login_failure', { action: { any: ['LOGIN_FAILURE'], not: [] } }, 'names are case-insensitive'],
  ['action:"CREATE_TASK"', { action: { any: ['CREATE_TASK'], not: [] } }, 'a quoted value'],
  ['action:CREATE_TASK action:DELETE_TASK', { action: { any: ['CREATE_TASK', 'DELETE_TASK'], not: [] } }, 'a repeated key: alternatives'],
  ['-action:LOGOUT', { action: { any: [], not: ['LOGOUT'] } }, 'negated'],
  ['actor:12', { actor: { any: [{ id: 12 }], not: [] } }],
  ['actor:Alice@Example.COM', { actor: { any: [{ email: 'alice@example.com' }], not: [] } }, 'an email, lower-cased'],
  ['actor:none -actor:3', { actor: { any: ['none'], not: [{ id: 3 }] } }],
  ['actor:NONE', { actor: { any: ['none'], not: [] } }],
  ['resource:TASK', { resource: { any: [{ type: 'TASK' }], not: [] } }],
  ['resource:task/5 -resource:USER/7', { resource: { any: [{ type: 'TASK', id: 5 }], not: [{ type: 'USER', id: 7 }] } }],
  ['result:denied result:FAILURE', { result: { any: ['DENIED', 'FAILURE'], not: [] } }],
  ['-result:SUCCESS', { result: { any: [], not: ['SUCCESS'] } }],
  ['ip:203.0.113.24', { ip: { any: [{ family: 4, address: '203.0.113.24', bits: 32 }], not: [] } }],
  ['ip:10.0.0.0/8', { ip: { any: [{ family: 4, address: '10.0.0.0', bits: 8 }], not: [] } }],
  ['ip:2001:DB8::1', { ip: { any: [{ family: 6, address: '2001:db8::1', bits: 128 }], not: [] } }],
  ['ip:2001:db8::/32', { ip: { any: [{ family: 6, address: '2001:db8::', bits: 32 }], not: [] } }],
  ['ip:::ffff:10.1.2.3', { ip: { any: [{ family: 4, address: '10.1.2.3', bits: 32 }], not: [] } }, 'an IPv4-mapped address is the IPv4 one'],
  ['ip:::1', { ip: { any: [{ family: 6, address: '::1', bits: 128 }], not: [] } }],
  ['request:0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90', { request: { any: ['0b7d5c1e-5a3f-4f0e-9c8b-2f1d6e4a7b90'], not: [] } }],
  ['created:>=2026-11-26', { created: { any: [{ from: { at: day('2026-11-26'), inclusive: true } }], not: [] } }],
  ['created:>2026-11-26', { created: { any: [{ from: { at: day('2026-11-27'), inclusive: true } }], not: [] } }, '> a DATE: from the next day'],
  ['created:<2026-11-26', { created: { any: [{ to: { at: day('2026-11-26'), inclusive: false } }], not: [] } }],
  ['created:<=2026-11-26', { created: { any: [{ to: { at: day('2026-11-27'), inclusive: false } }], not: [] } }, '<= a DATE: the whole day'],
  ['created:<=2026-12-31', { created: { any: [{ to: { at: day('2027-01-01'), inclusive: false } }], not: [] } }, 'across a year'],
  ['created:<=2028-02-28', { created: { any: [{ to: { at: day('2028-02-29'), inclusive: false } }], not: [] } }, 'a leap year'],
  ['created:2026-11-01..2026-11-26', { created: { any: [{ from: { at: day('2026-11-01'), inclusive: true }, to: { at: day('2026-11-27'), inclusive: false } }], not: [] } }],
  ['created:2026-11-26..2026-11-26', { created: { any: [{ from: { at: day('2026-11-26'), inclusive: true }, to: { at: day('2026-11-27'), inclusive: false } }], not: [] } }, 'one day'],
  ['created:>=2026-11-26T09:30:00Z', { created: { any: [{ from: { at: '2026-11-26T09:30:00+00:00', inclusive: true } }], not: [] } }],
  ['created:>2026-11-26T09:30:00.123Z', { created: { any: [{ from: { at: '2026-11-26T09:30:00.123+00:00', inclusive: false } }], not: [] } }],
  ['created:<=2026-11-26T09:30+02:00', { created: { any: [{ to: { at: '2026-11-26T09:30:00+02:00', inclusive: true } }], not: [] } }, 'a date-time bound as written'],
  ['created:<2026-11-26T09:30:00.123456-0530', { created: { any: [{ to: { at: '2026-11-26T09:30:00.123456-05:30', inclusive: false } }], not: [] } }],
  ['created:">=2026-11-26 09:30"', { created: { any: [{ from: { at: '2026-11-26T09:30:00+00:00', inclusive: true } }], not: [] } }, 'a quoted value with a space'],
  ['created:2026-11-26T10:00:00Z..2026-11-26T10:00:00Z', { created: { any: [{ from: { at: '2026-11-26T10:00:00+00:00', inclusive: true }, to: { at: '2026-11-26T10:00:00+00:00', inclusive: true } }], not: [] } }],
  ['created:2026-11-26..2026-11-26T12:00:00Z', { created: { any: [{ from: { at: day('2026-11-26'), inclusive: true }, to: { at: '2026-11-26T12:00:00+00:00', inclusive: true } }], not: [] } }],
  ['created:<=9999-12-31', { created: { any: [{ to: { at: '10000-01-01T00:00:00+00:00', inclusive: false } }], not: [] } }, 'the last day there is'],
  ['created:>=0050-01-01', { created: { any: [{ from: { at: day('0050-01-01'), inclusive: true } }], not: [] } }, 'a year below 100 is that year'],
  [
    '  action:CREATE_TASK\tactor:3   -result:SUCCESS  ',
    { action: { any: ['CREATE_TASK'], not: [] }, actor: { any: [{ id: 3 }], not: [] }, result: { any: [], not: ['SUCCESS'] } },
    'spaces and tabs between terms',
  ],
  [Array.from({ length: 20 }, (_, i) => `actor:${i + 1}`).join(' '), { actor: { any: Array.from({ length: 20 }, (_, i) => ({ id: i + 1 })), not: [] } }, '20 terms'],
  [`request:${'r'.repeat(128)}`, { request: { any: ['r'.repeat(128)], not: [] } }, 'the longest request id'],
];

// [query, the term the detail must quote, what the detail must say]
const REFUSED: Array<[q: string, quoted: string, says: RegExp]> = [
  ['alice', '"alice"', /bare word/],
  ['"alice smith"', `'"alice smith"'`, /bare word/],
  ['action:LOGIN_SUCCESS oops', '"oops"', /bare word/],
  ['-', '"-"', /negates nothing/],
  ['who:alice', '"who:alice"', /unknown key "who"/],
  ['Action:LOGIN_SUCCESS', '"Action:LOGIN_SUCCESS"', /unknown key "Action"/],
  ['--action:LOGOUT', '"--action:LOGOUT"', /unknown key "-action"/],
  [':LOGOUT', '":LOGOUT"', /no key/],
  ['action:', '"action:"', /empty value/],
  ['action:""', `'action:""'`, /empty value/],
  ['actor:" "', `'actor:" "'`, /empty value/],
  ['actor:"alice', `'actor:"alice'`, /unbalanced quote/],
  ['actor:alice"', `'actor:alice"'`, /unbalanced quote/],
  ['action:"LOGOUT"x', `'action:"LOGOUT"x'`, /after its closing quote/],
  ['action:LOG"OUT"', `'action:LOG"OUT"'`, /quote inside its value/],
  ['action:NOT_AN_ACTION', '"action:NOT_AN_ACTION"', /unknown action "NOT_AN_ACTION"/],
  ['action:login-success', '"action:login-success"', /unknown action/],
  ['actor:0', '"actor:0"', /user id .*an email, or none/],
  ['actor:-3', '"actor:-3"', /user id/],
  ['actor:12abc', '"actor:12abc"', /user id/],
  ['actor:99999999999999999999', '"actor:99999999999999999999"', /user id/],
  ['actor:alice', '"actor:alice"', /user id/],
  ['resource:TICKET', '"resource:TICKET"', /unknown resource type "TICKET"/],
  ['resource:TASK/', '"resource:TASK/"', /not a resource id/],
  ['resource:TASK/abc', '"resource:TASK/abc"', /not a resource id/],
  ['resource:TASK/0', '"resource:TASK/0"', /not a resource id/],
  ['resource:TASK/5/6', '"resource:TASK/5/6"', /TYPE or TYPE\/<id>/],
  ['result:OK', '"result:OK"', /unknown result "OK"/],
  ['ip:10.0.0', '"ip:10.0.0"', /not an IPv4 or IPv6 address/],
  ['ip:10.0.0.256', '"ip:10.0.0.256"', /not an IPv4 or IPv6 address/],
  ['ip:localhost', '"ip:localhost"', /not an IPv4 or IPv6 address/],
  ['ip:fe80::1%eth0', '"ip:fe80::1%eth0"', /not an IPv4 or IPv6 address/],
  ['ip:10.0.0.0/33', '"ip:10.0.0.0/33"', /prefix length is 0..32/],
  ['ip:2001:db8::/129', '"ip:2001:db8::/129"', /prefix length is 0..128/],
  ['ip:10.0.0.0/', '"ip:10.0.0.0/"', /prefix length/],
  ['ip:10.0.0.0/x', '"ip:10.0.0.0/x"', /prefix length/],
  ['request:a/b', '"request:a/b"', /request id/],
  [`request:${'r'.repeat(129)}`, `"request:${'r'.repeat(129)}"`, /request id/],
  ['created:2026-11-26', '"created:2026-11-26"', /comparison .* or a range DATE\.\.DATE; for that whole day write created:2026-11-26\.\.2026-11-26/],
  ['created:=2026-11-26', '"created:=2026-11-26"', /comparison/],
  ['created:>=', '"created:>="', /needs a DATE/],
  ['created:>=yesterday', '"created:>=yesterday"', /"yesterday" is not a DATE/],
  ['created:>=2026-11-26T25:00:00Z', '"created:>=2026-11-26T25:00:00Z"', /not a time of day/],
  ['created:>=2026-11-26T10:60Z', '"created:>=2026-11-26T10:60Z"', /not a time of day/],
  ['created:>=2026-11-26T10:00:00+24:00', '"created:>=2026-11-26T10:00:00+24:00"', /not a UTC offset/],
  ['created:>=2026-02-29', '"created:>=2026-02-29"', /not a date of the calendar/],
  ['created:>=2026-13-01', '"created:>=2026-13-01"', /not a date of the calendar/],
  ['created:>=0000-01-01', '"created:>=0000-01-01"', /not a date of the calendar/],
  ['created:>=26-11-2026', '"created:>=26-11-2026"', /not a DATE/],
  ['created:>=2026-11-26T10:00:00.1234567Z', '"created:>=2026-11-26T10:00:00.1234567Z"', /not a DATE/],
  ['created:2026-11-26..', '"created:2026-11-26.."', /a DATE on each side/],
  ['created:..2026-11-26', '"created:..2026-11-26"', /a DATE on each side/],
  ['created:2026-11-27..2026-11-26', '"created:2026-11-27..2026-11-26"', /ends before it starts/],
  ['created:2026-11-26T10:00:00Z..2026-11-26T09:00:00Z', '"created:2026-11-26T10:00:00Z..2026-11-26T09:00:00Z"', /ends before it starts/],
  [Array.from({ length: 21 }, (_, i) => `actor:${i + 1}`).join(' '), '"actor:21"', /21 terms; at most 20/],
  [`request:${'r'.repeat(300)} request:${'s'.repeat(200)}`, `"request:${'r'.repeat(32)}…"`, /517 characters; at most 500/],
];

describe('the audit search syntax', () => {
  for (const [q, search, why] of ACCEPTED) {
    test(`reads ${JSON.stringify(q.length > 60 ? `${q.slice(0, 60)}…` : q)}${why ? ` (${why})` : ''}`, () => {
      const parsed = parseAuditSearch(q);
      assert.ok(parsed.ok, parsed.ok ? '' : parsed.detail);
      assert.deepEqual(parsed.search, search);
    });
  }

  for (const [q, quoted, says] of REFUSED) {
    test(`refuses ${JSON.stringify(q.length > 60 ? `${q.slice(0, 60)}…` : q)}, quoting the term and saying what is wrong`, () => {
      const parsed = parseAuditSearch(q);
      assert.equal(parsed.ok, false, `accepted ${q}`);
      if (parsed.ok) return;
      assert.ok(parsed.detail.includes(quoted), `the detail quotes ${quoted}: ${parsed.detail}`);
      assert.match(parsed.detail, says);
    });
  }

  test('counts characters, not UTF-16 units: 300 emoji are not over the limit, 501 are', () => {
    // 300 emoji are 600 UTF-16 units but 300 characters: a bare word, not too long.
    const emoji = parseAuditSearch('😀'.repeat(300));
    assert.ok(!emoji.ok && /bare word/.test(emoji.detail), emoji.ok ? '' : emoji.detail);
    const over = parseAuditSearch('😀'.repeat(501));
    assert.ok(!over.ok && /501 characters/.test(over.detail));
  });

  test('a term holding a double quote is quoted with single quotes, so that the detail stays readable', () => {
    const parsed = parseAuditSearch('actor:"a b');
    assert.ok(!parsed.ok);
    assert.ok(parsed.detail.startsWith(`'actor:"a b'`), parsed.detail);
  });

  test('the first wrong term is the one reported', () => {
    const parsed = parseAuditSearch('action:NOPE who:x');
    assert.ok(!parsed.ok);
    assert.match(parsed.detail, /^"action:NOPE"/);
  });
});
