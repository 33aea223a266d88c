// A self-accepting client module for the development-mode checks (client/hmr.js under
// `meteor run`): the suite edits HMR_VALUE, and Meteor's hot module replacement re-runs this
// module in the page without a reload. `loads` counts the runs within one page load.
export const HMR_VALUE = 'a';

window.e2eHmr = { value: HMR_VALUE, loads: (window.e2eHmr ? window.e2eHmr.loads : 0) + 1 };

if (module.hot) module.hot.accept();
