-- Team domain: projects and members, tasks, posts and likes, messages, notifications.
-- Deleting a user or a project cascades through foreign keys; audit_log has none, so its
-- records survive every cascade.

CREATE TABLE projects (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '' CHECK (length(description) <= 10000),
  created_by  bigint REFERENCES users (id) ON DELETE SET NULL,
  -- Bumped by any change to the project or its members (the strong ETag).
  version     integer NOT NULL DEFAULT 1,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE project_members (
  project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role       text NOT NULL CHECK (role IN ('OWNER', 'MEMBER')),
  added_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, user_id)
);
CREATE INDEX project_members_user_idx ON project_members (user_id);

CREATE TABLE tasks (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id  bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  title       text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '' CHECK (length(description) <= 10000),
  status      text NOT NULL DEFAULT 'TODO' CHECK (status IN ('TODO', 'IN_PROGRESS', 'IN_REVIEW', 'DONE', 'CANCELED')),
  assignee_id bigint REFERENCES users (id) ON DELETE SET NULL,
  created_by  bigint REFERENCES users (id) ON DELETE SET NULL,
  version     integer NOT NULL DEFAULT 1,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  -- PostgreSQL's own full-text search ('simple': no stemming, any language).
  search      tsvector GENERATED ALWAYS AS (to_tsvector('simple', title || ' ' || description)) STORED
);
CREATE INDEX tasks_project_idx ON tasks (project_id, id DESC);
CREATE INDEX tasks_assignee_idx ON tasks (assignee_id, id DESC);
CREATE INDEX tasks_status_idx ON tasks (status, id DESC);
CREATE INDEX tasks_search_idx ON tasks USING gin (search);

CREATE TABLE posts (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  author_id  bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  content    text NOT NULL CHECK (length(content) BETWEEN 1 AND 5000),
  -- Kept by the trigger below, so that it stays right under concurrent likes and when a
  -- liker's deletion cascades into post_likes.
  like_count integer NOT NULL DEFAULT 0 CHECK (like_count >= 0),
  -- Bumped with every like and unlike (the strong ETag), by the same trigger.
  version    integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX posts_author_idx ON posts (author_id, id DESC);

CREATE TABLE post_likes (
  post_id    bigint NOT NULL REFERENCES posts (id) ON DELETE CASCADE,
  user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (post_id, user_id)
);
CREATE INDEX post_likes_user_idx ON post_likes (user_id);

CREATE FUNCTION post_likes_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    UPDATE posts SET like_count = like_count + 1, version = version + 1 WHERE id = NEW.post_id;
  ELSE
    UPDATE posts SET like_count = like_count - 1, version = version + 1 WHERE id = OLD.post_id;
  END IF;
  RETURN NULL;
END;
$$;
CREATE TRIGGER post_likes_count AFTER INSERT OR DELETE ON post_likes
  FOR EACH ROW EXECUTE FUNCTION post_likes_count();

CREATE TABLE messages (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  room       text NOT NULL CHECK (room = 'general' OR room ~ '^project:[1-9][0-9]*$'),
  project_id bigint REFERENCES projects (id) ON DELETE CASCADE,
  author_id  bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  text       text NOT NULL CHECK (length(text) BETWEEN 1 AND 2000),
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((room = 'general') = (project_id IS NULL))
);
CREATE INDEX messages_room_idx ON messages (room, id DESC);
CREATE INDEX messages_author_idx ON messages (author_id);
CREATE INDEX messages_project_idx ON messages (project_id);

CREATE TABLE notifications (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  kind       text NOT NULL CHECK (kind IN ('task_assigned', 'task_status_changed', 'project_member_added', 'post_liked')),
  payload    jsonb NOT NULL,
  read_at    timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_user_idx ON notifications (user_id, id DESC);
CREATE INDEX notifications_unread_idx ON notifications (user_id, id DESC) WHERE read_at IS NULL;
