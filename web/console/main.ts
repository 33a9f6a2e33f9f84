// The audit console (GET /console): mounts the page. Built by scripts/build-web.mjs.
import { render } from 'preact';
import { html } from 'htm/preact';
import { createConsoleApi } from './api.js';
import { App } from './views/app.js';

render(html`<${App} api=${createConsoleApi()} />`, document.getElementById('app')!);
