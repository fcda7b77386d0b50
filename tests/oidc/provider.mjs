// A real OpenID Connect provider for the sign-in tests: oidc-provider (the
// certified Node implementation) on 127.0.0.1, on a free port, with a few
// test people and their groups.
//
// Usage: node provider.mjs '<json>' where the JSON names the one client:
// {"client_id": "...", "client_secret": "...", "redirect_uris": ["..."]}.
// Prints one line, {"issuer": "http://127.0.0.1:<port>"}, once listening.
//
// The sign-in page is a plain form (#login, #signin) that a browser or a
// raw client fills in with a login below; consent is given for the test
// client without asking. `POST /test/rotate` replaces the signing key (the
// old one leaves the key set), as an identity provider rotating its keys.
// `POST /test/groups` with {"login": "...", "groups": [...]} changes a test
// person's groups, as an administrator at the provider would.

import http from 'node:http';
import crypto from 'node:crypto';
import Provider from 'oidc-provider';

const settings = JSON.parse(process.argv[2] ?? '{}');

// The test people. `sub` never changes; the other claims may.
const people = {
  ana: { sub: 'sub-ana', preferred_username: 'Ana', email: 'ana@example.com', email_verified: true, groups: ['devs'] },
  ana2: { sub: 'sub-ana-2', preferred_username: 'ANA', email: 'ana2@example.com', email_verified: true, groups: [] },
  bob: { sub: 'sub-bob', preferred_username: 'bob', email: 'bob@example.com', email_verified: false, groups: ['ops'] },
  eve: { sub: 'sub-eve', preferred_username: 'eve', email: 'eve@elsewhere.test', email_verified: true, groups: [] },
  carol: { sub: 'sub-carol', preferred_username: 'carol', email: 'carol@example.com', email_verified: true, groups: ['devs', 'ops'] },
  // Another domain's ana (a guest, a second tenant domain, a consumer
  // account): her UPN-shaped login must not make her example.com's ana.
  mallory: { sub: 'sub-mallory', preferred_username: 'ana@elsewhere.test', email: 'ana@elsewhere.test', email_verified: true, groups: [] },
  dan: { sub: 'sub-dan', preferred_username: 'Dan@Example.com', email: 'dan@example.com', email_verified: true, groups: [] },
};
const bySub = Object.fromEntries(Object.values(people).map((p) => [p.sub, p]));

function signingKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };
}

function build(issuer) {
  const provider = new Provider(issuer, {
    clients: [{
      client_id: settings.client_id,
      client_secret: settings.client_secret,
      redirect_uris: settings.redirect_uris,
      grant_types: ['authorization_code'],
      response_types: ['code'],
    }],
    jwks: { keys: [signingKey()] },
    pkce: { required: () => true },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['preferred_username', 'name'],
      groups: ['groups'],
    },
    // The claims go into the ID token itself, as Google, Keycloak and Dex
    // put them: portcullis reads only the ID token.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: async (ctx, sub) => bySub[sub] && {
      accountId: sub,
      claims: async () => ({ ...bySub[sub] }),
    },
    // The test client is first-party: consent is given without a page.
    loadExistingGrant: async (ctx) => {
      const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope('openid email profile groups');
      grant.addOIDCClaims(['preferred_username', 'email', 'email_verified', 'groups', 'name']);
      await grant.save();
      return grant;
    },
  });
  return provider;
}

function form(request) {
  return new Promise((resolve) => {
    let body = '';
    request.on('data', (chunk) => { body += chunk; });
    request.on('end', () => resolve(new URLSearchParams(body)));
  });
}

function loginPage(uid, error) {
  return `<!doctype html><html lang="en"><head><title>Test identity provider</title></head><body>
<h1>Test identity provider</h1>${error ? `<p id="error">${error}</p>` : ''}
<form method="post" action="/interaction/${uid}/login">
<label for="login">Login</label><input id="login" name="login" autocomplete="off">
<button id="signin" type="submit">Sign in</button></form></body></html>`;
}

let provider;
let handler;

async function interaction(request, response, uid, action) {
  const details = await provider.interactionDetails(request, response);
  if (details.uid !== uid) throw new Error('interaction mismatch');
  if (!action) {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(loginPage(uid));
    return;
  }
  const login = (await form(request)).get('login') ?? '';
  const person = people[login];
  if (!person) {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(loginPage(uid, 'No such test person.'));
    return;
  }
  await provider.interactionFinished(request, response, { login: { accountId: person.sub } }, { mergeWithLastSubmission: false });
}

const server = http.createServer(async (request, response) => {
  try {
    const path = new URL(request.url, 'http://x').pathname;
    if (request.method === 'POST' && path === '/test/rotate') {
      provider = build(provider.issuer);
      handler = provider.callback();
      response.writeHead(204);
      response.end();
      return;
    }
    if (request.method === 'POST' && path === '/test/groups') {
      const body = await new Promise((resolve) => {
        let text = '';
        request.on('data', (chunk) => { text += chunk; });
        request.on('end', () => resolve(JSON.parse(text)));
      });
      people[body.login].groups = body.groups;
      response.writeHead(204);
      response.end();
      return;
    }
    const match = path.match(/^\/interaction\/([^/]+)(\/login)?$/);
    if (match) {
      await interaction(request, response, match[1], match[2]);
      return;
    }
    handler(request, response);
  } catch (error) {
    response.writeHead(500, { 'content-type': 'text/plain' });
    response.end(String(error));
  }
});

server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = build(issuer);
  handler = provider.callback();
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});
