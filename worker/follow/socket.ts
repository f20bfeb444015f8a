import { SocketSession } from './session.js';
import type { FollowStream } from './stream.js';

/** What a socket is to the follower (./ws-connection.ts in the runtime, a fake in tests). */
export type Connection = {
  readonly connected: boolean;
  start(): void;
  reconnect(): void;
  close(): Promise<void>;
};

/** What the connection tells of each socket it opens. */
export type ConnectionHooks = {
  onOpen: (send: (text: string) => void) => void;
  onMessage: (bytes: Buffer) => void;
  onClose: () => void;
  onTick: () => void;
};

export type FollowSocketDeps = {
  connect: (hooks: ConnectionHooks) => Connection;
  /** Where the frames of every socket go (its subscriptions and notifications). */
  stream: Pick<FollowStream, 'opened' | 'receive' | 'closed' | 'tick'>;
  /** A socket closed: the gap begins. */
  closed: () => void;
};

/**
 * The follower's connection and the session of the socket open on it (./session.ts): the one
 * place a session begins (a socket opens) and ends (the socket closes, is found silent, or the
 * connection is closed), so no state of a lost socket is reset by hand elsewhere
 * (docs/design.md, "Heals and sockets").
 */
export class FollowSocket {
  private connection: Connection | undefined;
  private current: SocketSession | undefined;

  constructor(private readonly deps: FollowSocketDeps) {}

  /** Whether a socket is open. */
  get connected(): boolean {
    return this.connection?.connected ?? false;
  }

  /** The open socket's session; none while no socket is open, or it was found silent. */
  get session(): SocketSession | undefined {
    return this.current;
  }

  /** Opens a connection (closing the one before); each socket it opens has a session of its own. */
  open(): void {
    void this.connection?.close();
    this.current = undefined;
    const { stream } = this.deps;
    this.connection = this.deps.connect({
      onOpen: (send) => {
        this.current = new SocketSession();
        stream.opened(send);
      },
      onMessage: (bytes) => stream.receive(bytes),
      onClose: () => {
        stream.closed();
        this.current = undefined;
        this.deps.closed();
      },
      onTick: () => stream.tick(),
    });
    this.connection.start();
  }

  /** Whatever the open socket showed is not believed any more: the next one starts anew. */
  drop(): void {
    this.current = undefined;
    this.connection?.reconnect();
  }

  /** Closes the connection, its session with it; none opens again until {@link open}. */
  async close(): Promise<void> {
    this.current = undefined;
    const connection = this.connection;
    this.connection = undefined;
    await connection?.close();
  }
}
