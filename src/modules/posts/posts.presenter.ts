// What a post looks like from the outside.
import type { PostRow } from './posts.repository.js';

export const presentPost = (p: PostRow) => ({ id: p.id, author_id: p.author_id, content: p.content, like_count: p.like_count, liked_by_me: p.liked_by_me, created_at: p.created_at });

/** liked_by_me makes two representations of one version: they carry different strong ETags. */
export const POST_VIEWS = ['', 'liked'];
export const postView = (p: PostRow) => (p.liked_by_me ? 'liked' : '');
