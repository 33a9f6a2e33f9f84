// Whitelists what a user looks like from the outside. Email is shown only to the user
// themself and to ADMINs.
import { versionEtag } from '../../http/preconditions.js';
import type { UserRow } from './users.repository.js';

/** Whoever is looking: enough to decide what they may see. */
export type Viewer = { id: number; role: string };

export interface UserView {
  id: number;
  email?: string;
  name: string;
  role: UserRow['role'];
  active: boolean;
  created_at: string;
  updated_at: string;
}

export const seesEmail = (viewer: Viewer | undefined, user: { id: number }) =>
  viewer !== undefined && (viewer.role === 'ADMIN' || viewer.id === user.id);

export function presentUser(user: UserRow, viewer: Viewer | undefined): UserView {
  const view: UserView = {
    id: user.id,
    name: user.name,
    role: user.role,
    active: user.active,
    created_at: user.created_at,
    updated_at: user.updated_at,
  };
  if (seesEmail(viewer, user)) view.email = user.email;
  return view;
}

/** The two representations (with and without email) carry different strong ETags. */
export const USER_VIEWS: readonly string[] = ['full', 'public'];
export function userEtag(user: UserRow, viewer: Viewer | undefined): string {
  return versionEtag('user', user.id, user.version, seesEmail(viewer, user) ? 'full' : 'public');
}
